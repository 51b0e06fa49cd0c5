// ADR-8 MetaOnly through kv_watch (../PROTOCOL.md "v3: watch"): the misbehave mode that proves kv.watch-meta-only.

package main

func init() { knownModes["kv-watch-meta-ignored"] = true }

// metaOnly is the meta_only the client is asked for: kv-watch-meta-ignored drops it, so the watcher sends values,
// as a client that ignores MetaOnly would.
func (d *driver) metaOnly(asked bool) bool { return asked && !d.mode("kv-watch-meta-ignored") }
