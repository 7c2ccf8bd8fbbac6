"""_internal"""
