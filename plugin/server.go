// Package plugin adapts the driver to Docker's remote network driver protocol:
// it is the only importer of go-plugins-helpers, decodes requests strictly,
// calls the driver, logs each failed request once and answers Docker with
// the user-facing error text.
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	stdlog "log"

	"github.com/docker/go-plugins-helpers/network"
	"github.com/docker/go-plugins-helpers/sdk"
	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/internal/connlimit"
	"github.com/rdma-macvlan/rdma-macvlan/metrics"
	"github.com/sirupsen/logrus"
)

// StatusPath serves the daemon's status as JSON (api.Status).
const StatusPath = api.StatusPath

// MetricsPath serves the daemon's Prometheus metrics (see package metrics).
const MetricsPath = metrics.Path

const (
	manifest     = `{"Implements": ["NetworkDriver"]}`
	maxBodyBytes = 1 << 20
	// readyWait bounds how long a request waits for start-up to finish.
	readyWait = 60 * time.Second
	// shutdownWait bounds how long a stopping server waits for the calls in
	// progress; the engine kills a managed plugin 10 s after SIGTERM.
	// gid_check=strict waits, which may take longer, are ended first (see
	// driver.Stopping).
	shutdownWait = 5 * time.Second
)

// Server serves the remote driver protocol. It can accept connections before
// the driver is ready (Docker gives up on a plugin that does not answer within
// about 9.5 s): calls wait until SetDriver.
type Server struct {
	log   *logrus.Logger
	ready chan struct{}
	drv   *driver.Driver // set once before ready is closed
	mux   *http.ServeMux
	// metrics counts every protocol call and serves MetricsPath (nil:
	// nothing counted, MetricsPath not found). Set before Serve.
	metrics *metrics.Metrics

	// Connection limits (see conns.go); tests shorten them.
	maxConns                                 int
	headerTimeout, bodyTimeout, writeTimeout time.Duration
	idleTimeout                              time.Duration
	conns                                    atomic.Pointer[connlimit.Listener] // set by Serve
}

// NewServer returns a Server whose calls wait for SetDriver.
func NewServer(log *logrus.Logger) *Server {
	s := &Server{log: log, ready: make(chan struct{}), mux: http.NewServeMux(),
		maxConns: processConnLimit(), headerTimeout: headerTimeout, bodyTimeout: bodyTimeout,
		writeTimeout: writeTimeout, idleTimeout: idleTimeout}
	s.routes()
	return s
}

// SetMaxConns sets the cap on the socket's open connections (by default
// DefaultMaxConns, or less when the limit on file descriptors is lower):
// the daemon lowers it to make room for the metrics address's connections
// under the same limit. Call it before Serve.
func (s *Server) SetMaxConns(n int) { s.maxConns = n }

// SetMetrics has the server count its calls in m and serve m at
// MetricsPath. Call it before Serve.
func (s *Server) SetMetrics(m *metrics.Metrics) { s.metrics = m }

// SetDriver makes the server answer calls with d, and the metrics' gauges
// read d's status. Call it once.
func (s *Server) SetDriver(d *driver.Driver) {
	s.drv = d
	if s.metrics != nil {
		s.metrics.SetStatus(d.Status)
	}
	close(s.ready)
}

// ServeHTTP makes Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Listen opens the unix socket at path, replacing a stale socket file, with
// permissions that let only root (and Docker) connect.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket path %s exists and is not a socket: remove it or pass another --socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s is served by another process: stop it or pass another --socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	return l, nil
}

// Serve answers requests on l until ctx is done, then stops accepting and
// waits (bounded) for calls in progress.
//
// Every connection is bounded: headers within headerTimeout, the whole
// request within bodyTimeout, each answer written within writeTimeout, idle
// between requests for at most idleTimeout; and at most maxConns are open
// (see connlimit.Listener).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	conns := connlimit.New(l, s.maxConns, s.tooMany)
	s.conns.Store(conns)
	s.log.WithFields(logrus.Fields{"max_connections": s.maxConns, "idle_timeout": s.idleTimeout, "request_timeout": s.bodyTimeout}).Debug("connection limits")
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.headerTimeout,
		ReadTimeout:       s.bodyTimeout,
		IdleTimeout:       s.idleTimeout,
		MaxHeaderBytes:    connlimit.MaxHeaderBytes,
		ConnContext:       connlimit.ConnContext,
		ErrorLog:          stdlog.New(s.log.WriterLevel(logrus.WarnLevel), "", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(conns) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Strict GID waits may last longer than the engine lets a stopping
	// plugin live: end them with an answer that says why.
	select {
	case <-s.ready:
		s.drv.Stopping()
	default:
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("stop serving: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// tooMany says, at most once a minute, that connections are being closed
// at the cap.
func (s *Server) tooMany(closed int64) {
	s.log.WithFields(logrus.Fields{"max_connections": s.maxConns, "closed_so_far": closed}).
		Warn("too many open connections to the plugin socket: closing the longest idle ones (a client opens connections and does not use them)")
}

// post is the part every protocol call shares: POST only (as Docker's plugin
// client sends them), a JSON body (see jsonContentType) read whole within the
// request's deadline (see readBody) and handed to fn, the answer's write
// bounded by writeTimeout, and the call counted in the metrics (method op,
// its outcome and time: see counted).
func (s *Server) post(op string, fn func(w http.ResponseWriter, r *http.Request, body []byte)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w := &callWriter{ResponseWriter: rw}
		defer s.counted(op, w, time.Now())
		if r.Method != http.MethodPost {
			w.refused(s.metrics, metrics.RefusalBadRequest)
			s.writing(w)
			w.Header().Set("Allow", http.MethodPost)
			s.log.WithFields(logrus.Fields{"op": op, "method": abbreviate([]byte(r.Method))}).Warn("request refused: not POST")
			w.Header().Set("Content-Type", sdk.DefaultContentTypeV1_1)
			w.WriteHeader(http.StatusMethodNotAllowed)
			_ = json.NewEncoder(w).Encode(network.NewErrorResponse(fmt.Sprintf("%s takes POST, not %s: the plugin protocol posts every call", op, abbreviate([]byte(r.Method)))))
			return
		}
		if ct := r.Header.Get("Content-Type"); !jsonContentType(ct) {
			w.refused(s.metrics, metrics.RefusalBadRequest)
			s.writing(w)
			s.log.WithFields(logrus.Fields{"op": op, "content_type": abbreviate([]byte(ct))}).Warn("request refused: not JSON")
			w.Header().Set("Content-Type", sdk.DefaultContentTypeV1_1)
			w.WriteHeader(http.StatusUnsupportedMediaType)
			_ = json.NewEncoder(w).Encode(network.NewErrorResponse(fmt.Sprintf("%s request has Content-Type %q: the plugin protocol's body is JSON; send it with Content-Type application/json (curl: -H 'Content-Type: application/json'), or none", op, abbreviate([]byte(ct)))))
			return
		}
		body, err := s.readBody(w, r, op)
		if err != nil {
			s.fail(w, op, err)
			return
		}
		fn(w, r, body)
	}
}

// jsonContentType reports whether a request's Content-Type header allows
// its body to be JSON: none (Docker's plugin client, moby's pkg/plugins,
// sends none, only Accept: application/vnd.docker.plugins.v1.2+json),
// application/json, or a JSON-based type such as
// application/vnd.docker.plugins.v1.2+json. A form or text type is refused:
// nothing that speaks the protocol sends one.
func jsonContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// readBody reads a request's whole body, at most maxBodyBytes, while the
// connection's read deadline (bodyTimeout from the request's first byte)
// still holds: every route (post, and GET /v1/status) reads its body before
// it answers, so a body
// announced and never sent, or sent slowly, ends the request at that
// deadline whatever the route. (The HTTP server would otherwise read the
// rest itself after the handler, with no deadline once answering cleared
// it.)
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, op string) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, &driver.BadRequestError{Msg: fmt.Sprintf("%s request is larger than %d bytes: nothing Docker sends is that large", op, maxBodyBytes)}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, &driver.BadRequestError{Msg: fmt.Sprintf("%s request did not arrive in full within %s (%d of %d body bytes): send the whole request at once", op, s.bodyTimeout, len(body), r.ContentLength)}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s request: %w", op, err)
	}
	return body, nil
}

// writing bounds the write of an answer: a client that does not read cannot
// hold the connection.
func (s *Server) writing(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeTimeout))
}

// answering bounds the write of an answer (see writing). It also ends the
// request's read deadline, so a call that takes long (waiting for start-up
// or a GID watch) is not cut: call it only once the body is read.
func (s *Server) answering(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	s.writing(w)
}

// route registers a protocol call whose handler needs the driver.
func (s *Server) route(path string, fn func(d *driver.Driver, body []byte) (any, error)) {
	op := path[len("/NetworkDriver."):]
	s.mux.HandleFunc(path, s.post(op, func(w http.ResponseWriter, r *http.Request, body []byte) {
		done, ok := connlimit.Busy(r.Context())
		if !ok {
			return // closed for a newcomer before the call started
		}
		defer done()
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		select {
		case <-s.ready:
		case <-time.After(readyWait):
			s.fail(w, op, errors.New("rdma-macvlan is still starting: retry in a moment"))
			return
		case <-r.Context().Done():
			return
		}
		res, err := fn(s.drv, body)
		s.answering(w)
		if err != nil {
			s.fail(w, op, err)
			return
		}
		sdk.EncodeResponse(w, res, false)
	}))
}

// fail logs a failed call once and answers Docker with the error's text,
// which the docker CLI shows to the user, within writeTimeout. It tells the
// metrics whether the call was refused (and why) or failed.
func (s *Server) fail(w http.ResponseWriter, op string, err error) {
	if cw, ok := w.(*callWriter); ok {
		if reason := refusalReason(err); reason != "" {
			cw.refused(s.metrics, reason)
		} else {
			cw.outcome = metrics.CallError
		}
	}
	s.writing(w)
	entry := s.log.WithField("op", op).WithError(err)
	if driver.IsRefusal(err) {
		entry.Warn("request refused")
	} else {
		entry.Error("request failed")
	}
	sdk.EncodeResponse(w, network.NewErrorResponse(err.Error()), true)
}

func (s *Server) routes() {
	s.mux.HandleFunc("/Plugin.Activate", s.post("Plugin.Activate", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		s.answering(w)
		w.Header().Set("Content-Type", sdk.DefaultContentTypeV1_1)
		fmt.Fprintln(w, manifest)
	}))
	// Capabilities are static: answer them even while starting up.
	s.mux.HandleFunc("/NetworkDriver.GetCapabilities", s.post("GetCapabilities", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		s.answering(w)
		c := driver.GetCapabilities()
		sdk.EncodeResponse(w, &capabilitiesResponse{Scope: c.Scope, ConnectivityScope: c.ConnectivityScope, GwAllocChecker: c.GatewayAllocCheck}, false)
	}))
	s.mux.HandleFunc(StatusPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			s.writing(w)
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, StatusPath+" takes GET", http.StatusMethodNotAllowed)
			return
		}
		// A GET has no body; one announced is read (and dropped) within
		// the request's deadline like any other.
		if _, err := s.readBody(w, r, "GET "+StatusPath); err != nil {
			s.writing(w)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-s.ready:
		default:
			s.writing(w)
			http.Error(w, "rdma-macvlan is still starting", http.StatusServiceUnavailable)
			return
		}
		done, ok := connlimit.Busy(r.Context())
		if !ok {
			return
		}
		defer done()
		var st api.Status
		if r.URL.RawQuery == api.BriefQuery {
			st = s.drv.Brief()
		} else {
			st = s.drv.Status()
		}
		s.answering(w)
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
	s.mux.HandleFunc(MetricsPath, func(w http.ResponseWriter, r *http.Request) {
		if s.metrics == nil {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet {
			s.writing(w)
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, MetricsPath+" takes GET", http.StatusMethodNotAllowed)
			return
		}
		if _, err := s.readBody(w, r, "GET "+MetricsPath); err != nil {
			s.writing(w)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		done, ok := connlimit.Busy(r.Context())
		if !ok {
			return
		}
		defer done()
		// Served while starting too: the calls' counters are there, the
		// gauges read from the status once the driver is ready.
		s.answering(w)
		s.metrics.Handler().ServeHTTP(w, r)
	})
	s.route("/NetworkDriver.CreateNetwork", createNetwork)
	s.route("/NetworkDriver.DeleteNetwork", deleteNetwork)
	s.route("/NetworkDriver.CreateEndpoint", createEndpoint)
	s.route("/NetworkDriver.DeleteEndpoint", deleteEndpoint)
	s.route("/NetworkDriver.EndpointOperInfo", endpointInfo)
	s.route("/NetworkDriver.Join", join)
	s.route("/NetworkDriver.Leave", leave)
	s.route("/NetworkDriver.ProgramExternalConnectivity", programExternalConnectivity)
	s.route("/NetworkDriver.RevokeExternalConnectivity", revokeExternalConnectivity)
	s.route("/NetworkDriver.DiscoverNew", discover)
	s.route("/NetworkDriver.DiscoverDelete", discover)
	s.route("/NetworkDriver.AllocateNetwork", allocateNetwork)
	s.route("/NetworkDriver.FreeNetwork", freeNetwork)
	s.route("/NetworkDriver.GwAllocCheck", gwAllocCheck)
}
