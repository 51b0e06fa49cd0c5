// ADR-19 API prefixes (../PROTOCOL.md connect's api_prefix and inbox_prefix): a session's JetStream context made with
// jetstream.NewWithAPIPrefix and its connection with nats.CustomInboxPrefix. kv-prefix-ignored: kv_put publishes to
// $KV.<bucket>.<key> itself, whatever the API prefix (a client whose KV ignores it).

package main

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const kvPrefixIgnored = "kv-prefix-ignored"

func init() {
	knownModes[kvPrefixIgnored] = true
}

func inboxOption(prefix string) []nats.Option {
	if prefix == "" {
		return nil
	}
	return []nats.Option{nats.CustomInboxPrefix(prefix)}
}

func newJetStream(nc *nats.Conn, apiPrefix string) (jetstream.JetStream, error) {
	if apiPrefix == "" {
		return jetstream.New(nc)
	}
	return jetstream.NewWithAPIPrefix(nc, apiPrefix)
}

func putUnprefixed(ctx context.Context, s *session, bucket, key string, value []byte) (uint64, error) {
	ack, err := s.js.Publish(ctx, "$KV."+bucket+"."+key, value)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
