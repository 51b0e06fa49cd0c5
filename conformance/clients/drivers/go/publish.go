//jetcheck:feature publish-retry
//jetcheck:ops publish_retrying

// JetStream publish with retries on no responders (../PROTOCOL.md "publish_retrying", ADR-22) over
// jetstream.JetStream.Publish with WithRetryAttempts and WithRetryWait.

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func init() { handles((*driver).publishRetrying, "publish_retrying") }

type publishRetryingRequest struct {
	Subject       string  `json:"subject"`
	PayloadB64    string  `json:"payload_b64"`
	RetryAttempts int     `json:"retry_attempts"`
	RetryWaitS    float64 `json:"retry_wait_s"`
}

func (d *driver) publishRetrying(req *request) (any, error) {
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	var args publishRetryingRequest
	if json.Unmarshal(req.Raw, &args) != nil || args.Subject == "" {
		return nil, failure("invalid", "publish_retrying needs \"subject\"")
	}
	payload, err := base64.StdEncoding.DecodeString(args.PayloadB64)
	if err != nil {
		return nil, failure("invalid", "publish_retrying: payload_b64: %v", err)
	}
	attempts := args.RetryAttempts
	if d.mode("publish-no-retry") { // misbehave: no retry whatever was asked
		attempts = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	ack, err := s.js.Publish(ctx, args.Subject, payload,
		jetstream.WithRetryAttempts(attempts), jetstream.WithRetryWait(seconds(args.RetryWaitS)))
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return nil, &apiFailure{Kind: "no_responders", Message: describe(err)}
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"stream": ack.Stream, "seq": ack.Sequence}, nil
}
