// The jetcheck driver for nats.go's jetstream package: protocol v3 (conformance/clients/drivers/PROTOCOL.md).
//
// One JSON object per line in on stdin (requests), out on stdout (responses, deliveries, events). Every request
// runs in its own goroutine; one writer goroutine owns stdout so lines never interleave. stderr is a log that
// never carries credentials.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	protocolVersion = 3
	clientModule    = "github.com/nats-io/nats.go"
	apiTimeout      = 10 * time.Second
	chattyInterval  = 100 * time.Millisecond
)

// start carries Go's monotonic clock reading: time.Since(start) never jumps with the wall clock.
var start = time.Now()

func monoNs() int64 { return time.Since(start).Nanoseconds() }

// ---------------------------------------------------------------------------------------------------------------
// Output

type driver struct {
	out       chan []byte
	outMu     sync.RWMutex // guards outClosed: client callbacks may still fire while the driver exits
	outClosed bool
	wg        sync.WaitGroup // requests in flight

	mu       sync.Mutex
	sessions map[string]*session
	subs     map[string]*subscription
	modes    map[string]bool
	chatty   bool // the chatty ticker runs
}

func newDriver() *driver {
	return &driver{
		out:      make(chan []byte, 1024),
		sessions: map[string]*session{},
		subs:     map[string]*subscription{},
		modes:    map[string]bool{},
	}
}

func (d *driver) write(record any) {
	line, err := json.Marshal(record)
	if err != nil {
		log.Printf("cannot encode a record: %v", err)
		return
	}
	d.outMu.RLock()
	defer d.outMu.RUnlock()
	if !d.outClosed {
		d.out <- line
	}
}

// closeOutput ends the output: records written afterwards are dropped, the writer flushes and finishes.
func (d *driver) closeOutput() {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	if !d.outClosed {
		d.outClosed = true
		close(d.out)
	}
}

func (d *driver) writer(done chan<- struct{}) {
	w := bufio.NewWriter(os.Stdout)
	for line := range d.out {
		w.Write(line)
		w.WriteByte('\n')
		if len(d.out) == 0 {
			w.Flush()
		}
	}
	w.Flush()
	close(done)
}

type apiFailure struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Code    *int   `json:"code"`
	ErrCode *int   `json:"err_code"`
}

func (f *apiFailure) Error() string { return f.Kind + ": " + f.Message }

func failure(kind, format string, args ...any) *apiFailure {
	return &apiFailure{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// classify maps a client error onto the protocol's error kinds, keeping the client's own message.
func classify(err error) *apiFailure {
	var already *apiFailure
	if errors.As(err, &already) {
		return already
	}
	message := describe(err)
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) && jsErr.APIError() != nil && jsErr.APIError().Code != 0 {
		api := jsErr.APIError()
		code, errCode := api.Code, int(api.ErrorCode)
		return &apiFailure{Kind: "api", Message: message, Code: &code, ErrCode: &errCode}
	}
	switch {
	case errors.Is(err, jetstream.ErrInvalidOption), errors.Is(err, nats.ErrInvalidArg),
		errors.Is(err, jetstream.ErrInvalidStreamName), errors.Is(err, jetstream.ErrInvalidConsumerName):
		return &apiFailure{Kind: "invalid", Message: message}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return &apiFailure{Kind: "timeout", Message: message}
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, os.ErrNotExist), isAny(err, connectionErrors):
		return &apiFailure{Kind: "connection", Message: message}
	}
	return &apiFailure{Kind: "other", Message: message}
}

// connectionErrors are the client's errors for a lost connection beside nats.go's own (later releases add some:
// errors_*.go).
var connectionErrors []error

func isAny(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// namedError is one of the client's sentinel errors and its name in Go, for details.
type namedError struct {
	name string
	err  error
}

// The client's sentinel errors by name, so a detail reads "jetstream.ErrNoHeartbeat: nats: no heartbeat received".
var sentinels = []namedError{
	{"jetstream.ErrNoHeartbeat", jetstream.ErrNoHeartbeat},
	{"jetstream.ErrConsumerDeleted", jetstream.ErrConsumerDeleted},
	{"jetstream.ErrConsumerNotFound", jetstream.ErrConsumerNotFound},
	{"jetstream.ErrConsumerLeadershipChanged", jetstream.ErrConsumerLeadershipChanged},
	{"jetstream.ErrOrderedConsumerReset", jetstream.ErrOrderedConsumerReset},
	{"jetstream.ErrBadRequest", jetstream.ErrBadRequest},
	{"jetstream.ErrMsgIteratorClosed", jetstream.ErrMsgIteratorClosed},
	{"jetstream.ErrNoMessages", jetstream.ErrNoMessages},
	{"jetstream.ErrMaxBytesExceeded", jetstream.ErrMaxBytesExceeded},
	{"jetstream.ErrStreamNotFound", jetstream.ErrStreamNotFound},
	{"jetstream.ErrInvalidOption", jetstream.ErrInvalidOption},
	{"nats.ErrNoResponders", nats.ErrNoResponders},
	{"nats.ErrTimeout", nats.ErrTimeout},
	{"nats.ErrConnectionClosed", nats.ErrConnectionClosed},
	{"nats.ErrSlowConsumer", nats.ErrSlowConsumer},
	{"context.DeadlineExceeded", context.DeadlineExceeded},
}

// describe names err by the first of `first`, then of sentinels, that it is (its Go type otherwise).
func describe(err error, first ...namedError) string {
	for _, named := range [][]namedError{first, sentinels} {
		for _, s := range named {
			if errors.Is(err, s.err) {
				return s.name + ": " + err.Error()
			}
		}
	}
	return fmt.Sprintf("%T: %v", err, err)
}

// ---------------------------------------------------------------------------------------------------------------
// Requests

type startPolicy struct {
	DeliverPolicy string  `json:"deliver_policy"`
	Seq           *uint64 `json:"seq"`
	Time          *string `json:"time"`
}

type request struct {
	ID                 *int64             `json:"id"`
	Op                 string             `json:"op"`
	Session            string             `json:"session"`
	Sub                string             `json:"sub"`
	URL                string             `json:"url"`
	Credentials        map[string]*string `json:"credentials"`
	ReconnectWaitS     *float64           `json:"reconnect_wait_s"`
	Stream             string             `json:"stream"`
	Subject            string             `json:"subject"`
	Consumer           string             `json:"consumer"`
	IdleHeartbeatS     *float64           `json:"idle_heartbeat_s"`
	ExpiresS           *float64           `json:"expires_s"`
	MaxMessages        *int               `json:"max_messages"`
	Batch              *int               `json:"batch"`
	Start              *startPolicy       `json:"start"`
	InactiveThresholdS *float64           `json:"inactive_threshold_s"`
	Modes              []string           `json:"modes"`
	Durable            string             `json:"durable"`
	Queue              string             `json:"queue"`
	APIPrefix          string             `json:"api_prefix"`
	InboxPrefix        string             `json:"inbox_prefix"`
	Raw                []byte             `json:"-"`   // the whole request, for the ops of later protocol sections
	Obj                json.RawMessage    `json:"obj"` // object store ops' arguments (objectstore.go)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (d *driver) respond(id int64, result any, err error) {
	if err != nil {
		d.write(map[string]any{"id": id, "ok": false, "error": classify(err)})
		return
	}
	if result == nil {
		result = map[string]any{}
	}
	d.write(map[string]any{"id": id, "ok": true, "result": result})
}

func init() {
	handles(func(d *driver, _ *request) (any, error) { return d.hello(), nil }, "hello")
	handles((*driver).connect, "connect")
	handles(func(d *driver, req *request) (any, error) { return d.closeSession(req.Session) }, "close")
	handles(func(d *driver, req *request) (any, error) { return d.ping(req.Session) }, "ping")
	handles((*driver).ordered, "ordered")
	handles((*driver).consume, "consume")
	handles((*driver).fetch, "fetch")
	handles(func(d *driver, req *request) (any, error) { return d.stop(req.Sub) }, "stop")
	handles(func(d *driver, req *request) (any, error) { return d.misbehave(req.Modes) }, "misbehave")
}

func (d *driver) handle(req *request) (any, error) {
	if handler, ok := opHandlers[req.Op]; ok {
		return handler(d, req)
	}
	return nil, failure("unsupported", "op %q is not implemented by the nats.go driver (protocol v%d)", req.Op, protocolVersion)
}

func clientVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == clientModule {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return "unknown"
}

func (d *driver) hello() map[string]any {
	return map[string]any{
		"protocol":  protocolVersion,
		"client":    "nats.go",
		"version":   clientVersion(),
		"runtime":   runtime.Version(),
		"mono_ns":   monoNs(),
		"ops":       implementedOps(),
		"libraries": libraries(),
		// what this build left out because the nats.go release lacks it (release.go), by feature
		"not_in_release": notInReleaseFeatures(),
	}
}

// libraries are the exact versions of the client's modules built in (nats.go and what it brings).
func libraries() map[string]string {
	found := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.HasPrefix(dep.Path, "github.com/nats-io/") {
				found[dep.Path] = dep.Version
			}
		}
	}
	return found
}

// ---------------------------------------------------------------------------------------------------------------

func main() {
	log.SetFlags(log.Lmicroseconds)
	log.SetPrefix("nats.go driver: ")
	d := newDriver()
	written := make(chan struct{})
	go d.writer(written)

	finish := func() {
		d.wg.Wait()
		d.mu.Lock()
		ids := make([]string, 0, len(d.sessions))
		for id := range d.sessions {
			ids = append(ids, id)
		}
		d.mu.Unlock()
		for _, id := range ids {
			d.closeSession(id)
		}
		d.closeOutput()
		<-written
		os.Exit(0)
	}

	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" {
			continue
		}
		var req request
		if err := json.Unmarshal([]byte(line), &req); err != nil || req.ID == nil {
			var only struct{ ID *int64 }
			if json.Unmarshal([]byte(line), &only) == nil && only.ID != nil {
				d.respond(*only.ID, nil, failure("invalid", "unreadable request: %v", err))
			} else {
				log.Printf("unreadable request line (%d bytes) ignored: it has no id to answer", len(line))
			}
			continue
		}
		req.Raw = []byte(line)
		if req.Op == "shutdown" {
			d.wg.Wait()
			d.respond(*req.ID, nil, nil)
			finish()
		}
		d.wg.Add(1)
		go func(req request) {
			defer d.wg.Done()
			result, err := d.handle(&req)
			d.respond(*req.ID, result, err)
		}(req)
	}
	finish()
}
