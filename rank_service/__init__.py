"""rank_service"""
