"""OAuth 2.1 resource server: access tokens, their verifiers, protected resource metadata."""
