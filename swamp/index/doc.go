// Package index reads and writes the objects of swamp's remote datastore index
// (the @swamp/s3-datastore and @swamp/gcs-datastore extensions; facts in
// ../shared/reference/swamp-datastore.md §1): the v2 partition meta
// _index/_meta.json, the per-partition shards _index/{partition}.json, the
// legacy v1 monolith .datastore-index.json, the IndexEntry they all hold, and
// the key layout with its optional {namespace}/ prefix.
//
// It is pure: it parses and encodes bytes and builds keys, and does no I/O.
//
// Parsing follows what swamp's readers accept and is strict where a lenient
// reading could import or mirror the wrong thing:
//
//   - unknown fields are ignored (swamp's JavaScript readers ignore them);
//   - a shard must have "version": 1 and an "entries" object (swamp reads any
//     other version as absent: here ErrUnsupported, so the caller decides);
//   - a meta must have "version" 1 or 2 and a "partitions" array of strings;
//     a v2 meta must have an integer "commitSeq" ≥ 0;
//   - every entry's "key", when present, must equal its map key (the rel
//     path); "size" must be an integer ≥ 0; "sha256", when present and
//     non-empty, must be 64 hex digits (normalised to lower case);
//   - rel paths and partition keys must be non-empty and free of control
//     characters; partition keys must not contain "/".
//
// Errors wrap ledger.ErrInvalid, or ErrUnsupported for a well-formed object of
// a version this package does not read. The encoders produce what the parsers
// accept (a property the tests check), in the shape swamp writes.
package index
