// Keeps ad_proto non-empty until the first .proto file lands.
