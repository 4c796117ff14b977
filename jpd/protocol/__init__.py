"""The wire contract: JSON-RPC models, the question model, typed errors, the client port.

The lowest layer: everything above may import it; it imports nothing of `jpd`.
"""
