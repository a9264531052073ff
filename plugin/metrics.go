package plugin

import (
	"errors"
	"net/http"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/driver"
	"github.com/rdma-macvlan/rdma-macvlan/metrics"
)

// callWriter is the ResponseWriter of one protocol call: it remembers
// whether an answer was written and how the call ended, for the metrics.
type callWriter struct {
	http.ResponseWriter
	wrote   bool
	outcome string // "": ok if an answer was written, else abandoned
}

func (c *callWriter) WriteHeader(code int) {
	c.wrote = true
	c.ResponseWriter.WriteHeader(code)
}

func (c *callWriter) Write(b []byte) (int, error) {
	c.wrote = true
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.NewResponseController reach the connection's deadlines.
func (c *callWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// refused records that the call was refused for reason and counts the
// refusal in m (nil: none).
func (c *callWriter) refused(m *metrics.Metrics, reason string) {
	c.outcome = metrics.CallRefused
	if m != nil {
		m.Refusal(reason)
	}
}

// counted counts call op, begun at start, once it is answered (or
// abandoned).
func (s *Server) counted(op string, w *callWriter, start time.Time) {
	if s.metrics == nil {
		return
	}
	outcome := w.outcome
	if outcome == "" {
		outcome = metrics.CallOK
		if !w.wrote {
			outcome = metrics.CallAbandoned
		}
	}
	s.metrics.Call(op, outcome, time.Since(start))
}

// refusalReason is the metrics' reason for err, a call's error, or "" when
// err is a failure rather than a refusal.
func refusalReason(err error) string {
	switch {
	case is[*driver.TableFullError](err):
		return metrics.RefusalGIDTableFull
	case is[*driver.StrictNotReadyError](err):
		return metrics.RefusalGIDCheckStrict
	case is[*driver.InvalidOptionError](err):
		return metrics.RefusalInvalidOption
	case is[*driver.BadRequestError](err):
		return metrics.RefusalBadRequest
	case is[*driver.ConflictError](err):
		return metrics.RefusalConflict
	case is[*driver.HostSetupError](err):
		return metrics.RefusalHostSetup
	case is[*driver.AddressConflictError](err):
		return metrics.RefusalAddressConflict
	case driver.IsRefusal(err):
		return metrics.RefusalOther
	}
	return ""
}

// is reports whether err's tree holds an error of type E.
func is[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}
