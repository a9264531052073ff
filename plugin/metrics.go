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
	var (
		full   *driver.TableFullError
		strict *driver.StrictNotReadyError
		inv    *driver.InvalidOptionError
		bad    *driver.BadRequestError
		clash  *driver.ConflictError
		host   *driver.HostSetupError
		dup    *driver.AddressConflictError
	)
	switch {
	case errors.As(err, &full):
		return metrics.RefusalGIDTableFull
	case errors.As(err, &strict):
		return metrics.RefusalGIDCheckStrict
	case errors.As(err, &inv):
		return metrics.RefusalInvalidOption
	case errors.As(err, &bad):
		return metrics.RefusalBadRequest
	case errors.As(err, &clash):
		return metrics.RefusalConflict
	case errors.As(err, &host):
		return metrics.RefusalHostSetup
	case errors.As(err, &dup):
		return metrics.RefusalAddressConflict
	case driver.IsRefusal(err):
		return metrics.RefusalOther
	}
	return ""
}
