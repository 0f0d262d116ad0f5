"""store_service"""
