"""Resources: URI templates and the checks on their values, resource objects."""
