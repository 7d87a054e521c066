// Keeps ad_proto non-empty even if no .proto file generated sources for it.
