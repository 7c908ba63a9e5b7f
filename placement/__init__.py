"""Placement of microservice instances on servers from their communication graph."""
