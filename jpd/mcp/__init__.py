"""MCP servers as tool sources (protocol.md section 9.6).

Importing this package is cheap: the `mcp` SDK is imported only by
`jpd.mcp.connection`, which the manager loads when a config first names a server.
"""
