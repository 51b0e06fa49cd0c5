//jetcheck:feature ttl-publish
//jetcheck:ops js_publish

// js_publish: a JetStream publish with a per-message TTL (ADR-43, jetstream.WithMsgTTL).

package main

import (
	"context"
	"encoding/base64"

	"github.com/nats-io/nats.go/jetstream"
)

func init() { handles(feature((*driver).ttlPublish), "js_publish") }

func (d *driver) ttlPublish(ctx context.Context, s *session, args featureRequest) (any, error) {
	data, err := base64.StdEncoding.DecodeString(args.DataB64)
	if err != nil {
		return nil, failure("invalid", "data_b64: %v", err)
	}
	var opts []jetstream.PublishOpt
	if args.TTLS != nil && !d.mode("ttl-dropped") {
		opts = append(opts, jetstream.WithMsgTTL(seconds(*args.TTLS)))
	}
	ack, err := s.js.Publish(ctx, args.Subject, data, opts...)
	if err != nil {
		return nil, err
	}
	return map[string]any{"seq": ack.Sequence, "stream": ack.Stream}, nil
}
