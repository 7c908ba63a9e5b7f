"""Microservices Profiler: resource-demand prediction, weights, flow classification, history."""
