"""braid-cluster: network-namespace clusters for braid (see ../README.md)."""
