"""embed_service"""
