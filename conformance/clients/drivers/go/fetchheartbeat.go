//jetcheck:feature fetch-heartbeat

// Fetch with an idle heartbeat (jetstream.FetchHeartbeat), for `fetch`'s idle_heartbeat_s.

package main

import "github.com/nats-io/nats.go/jetstream"

func init() { fetchHeartbeat = jetstream.FetchHeartbeat }
