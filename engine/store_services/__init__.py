"""store_services"""
