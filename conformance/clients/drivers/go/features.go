// Server features of 2.11/2.12 a client may expose (../PROTOCOL.md "Server features"): js_publish (a publish
// with jetstream.WithMsgTTL), js_pause / js_resume (JetStream.PauseConsumer / ResumeConsumer) and js_group_fetch
// (Consumer.Fetch with FetchPriorityGroup on one consumer handle per session, as an application keeps it, so the
// client's pin id carries from one pull to the next).

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	implementedOps = append(implementedOps, "js_publish", "js_pause", "js_resume", "js_group_fetch")
	for _, m := range featureModes {
		knownModes[m] = true
	}
}

// featureModes: js_publish sends no TTL; js_resume asks nothing; js_group_fetch takes a fresh consumer handle for
// every pull, so the client has no pin id to send; min-pending-dropped: js_group_fetch pulls without min_pending.
var featureModes = []string{"ttl-dropped", "resume-ignored", "pin-forgotten", "min-pending-dropped"}

type featureRequest struct {
	Subject  string   `json:"subject"`
	DataB64  string   `json:"data_b64"`
	TTLS     *float64 `json:"ttl_s"`
	Stream   string   `json:"stream"`
	Consumer string   `json:"consumer"`
	Until    string   `json:"until"`
	Group    string   `json:"group"`
	Batch    int      `json:"batch"`
	ExpiresS float64  `json:"expires_s"`
	// MinPending: an overflow pull's min_pending (jetstream.FetchMinPending); nil for none
	MinPending *int64 `json:"min_pending"`
}

var (
	handlesMu sync.Mutex
	handles   = map[string]jetstream.Consumer{} // session/stream/consumer -> the handle its pulls go through
)

func (d *driver) features(req *request) (any, error) {
	var args featureRequest
	if err := json.Unmarshal(req.Raw, &args); err != nil {
		return nil, failure("invalid", "unreadable %s request: %v", req.Op, err)
	}
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	switch req.Op {
	case "js_publish":
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
	case "js_pause":
		until, err := time.Parse(time.RFC3339Nano, args.Until)
		if err != nil {
			return nil, failure("invalid", "until: %v", err)
		}
		return pauseState(s.js.PauseConsumer(ctx, args.Stream, args.Consumer, until))
	case "js_resume":
		if d.mode("resume-ignored") {
			return map[string]any{"paused": false}, nil
		}
		return pauseState(s.js.ResumeConsumer(ctx, args.Stream, args.Consumer))
	case "js_group_fetch":
		return d.groupFetch(ctx, s, args)
	}
	return nil, failure("unsupported", "op %q is not implemented by the nats.go driver", req.Op)
}

func pauseState(r *jetstream.ConsumerPauseResponse, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	state := map[string]any{"paused": r.Paused}
	if !r.PauseUntil.IsZero() {
		state["pause_until"] = r.PauseUntil.UTC().Format(time.RFC3339Nano)
	}
	return state, nil
}

func (d *driver) groupFetch(ctx context.Context, s *session, args featureRequest) (any, error) {
	if args.Group == "" || args.Batch <= 0 || args.ExpiresS <= 0 {
		return nil, failure("invalid", "js_group_fetch needs group, batch and expires_s")
	}
	key := strings.Join([]string{s.id, args.Stream, args.Consumer}, "\x00")
	handlesMu.Lock()
	cons, kept := handles[key]
	handlesMu.Unlock()
	if !kept || d.mode("pin-forgotten") {
		var err error
		if cons, err = s.js.Consumer(ctx, args.Stream, args.Consumer); err != nil {
			return nil, err
		}
		handlesMu.Lock()
		handles[key] = cons
		handlesMu.Unlock()
	}
	opts := []jetstream.FetchOpt{jetstream.FetchMaxWait(seconds(args.ExpiresS)), jetstream.FetchPriorityGroup(args.Group)}
	if args.MinPending != nil && !d.mode("min-pending-dropped") {
		opts = append(opts, jetstream.FetchMinPending(*args.MinPending))
	}
	batch, err := cons.Fetch(args.Batch, opts...)
	if err != nil {
		return nil, err
	}
	deliveries := []map[string]any{}
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			log.Printf("js_group_fetch: a message without JetStream metadata: %v", err)
			continue
		}
		deliveries = append(deliveries, map[string]any{
			"stream_seq": meta.Sequence.Stream, "pin_id": msg.Headers().Get("Nats-Pin-Id"),
		})
		if err := msg.Ack(); err != nil {
			log.Printf("js_group_fetch: ack failed: %v", err)
		}
	}
	ending := ""
	if batchErr := batch.Error(); batchErr != nil {
		ending = describe(batchErr, namedError{"jetstream.ErrPinIDMismatch", jetstream.ErrPinIDMismatch})
	} else if len(deliveries) < args.Batch {
		ending = fmt.Sprintf("MessageBatch.Error() = nil after %d of %d messages", len(deliveries), args.Batch)
	}
	return map[string]any{"deliveries": deliveries, "error": ending}, nil
}
