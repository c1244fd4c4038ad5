//! Informers: Reflector, DeltaFIFO, Indexer, shared informers and listers (client-go `tools/cache`).
