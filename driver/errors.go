package driver

import (
	"errors"
	"fmt"
)

// A Refusal is an error caused by what a request asks, or by the state it
// meets, rather than by something that failed: the request changed nothing
// and the same request will be refused again until the user (or the host)
// changes something. Its text, shown to the user by the docker CLI, names
// the object and the fix. The daemon logs refusals as warnings and failures
// as errors. Each kind says what was wrong.
type Refusal interface {
	error
	refusal()
}

// IsRefusal reports whether err is, or wraps, a Refusal.
func IsRefusal(err error) bool {
	var r Refusal
	return errors.As(err, &r)
}

// InvalidOptionError: an option or value the user gave is wrong (docker
// network create -o and --subnet, --driver-opt, --mac-address).
type InvalidOptionError struct{ Msg string }

// BadRequestError: the request is not what the engine sends (malformed JSON,
// a sandbox key that is no path, an address not in CIDR form, an endpoint
// named under another network).
type BadRequestError struct{ Msg string }

// ConflictError: the request clashes with an object that exists (a network
// with the same ID and other settings, a parent in passthru use, an
// endpoint ID or link name taken, a foreign link in the way).
type ConflictError struct{ Msg string }

// HostSetupError: the host is not ready for the request (the parent has no
// RDMA device, is not RoCE, is smaller than the network's MTU, or is a port
// of a bond, bridge, team or OVS bridge, or a bond without RoCE LAG whose
// ports have RDMA devices of their own, or a VLAN on a VLAN over an RDMA
// device that tags RoCE frames itself; the RDMA subsystem is in exclusive
// netns mode).
type HostSetupError struct{ Msg string }

// TableFullError: the GID table of the network's RDMA port cannot hold the
// entries of one more container.
type TableFullError struct {
	HCA  string
	Port int
	// Need entries for this container; Free in the table now, of Size;
	// Held for Starting containers whose entries the table does not show
	// yet.
	Need, Free, Size, Held, Starting int
	Msg                              string
}

// AddressConflictError: on an address_check=strict network, another MAC on
// the parent's segment holds the container's address (another host gave it
// out).
type AddressConflictError struct{ Msg string }

func (e *InvalidOptionError) Error() string   { return e.Msg }
func (e *BadRequestError) Error() string      { return e.Msg }
func (e *ConflictError) Error() string        { return e.Msg }
func (e *HostSetupError) Error() string       { return e.Msg }
func (e *TableFullError) Error() string       { return e.Msg }
func (e *AddressConflictError) Error() string { return e.Msg }

func (*InvalidOptionError) refusal()   {}
func (*BadRequestError) refusal()      {}
func (*ConflictError) refusal()        {}
func (*HostSetupError) refusal()       {}
func (*TableFullError) refusal()       {}
func (*AddressConflictError) refusal() {}

func invalidf(format string, a ...any) error {
	return &InvalidOptionError{Msg: fmt.Sprintf(format, a...)}
}

func badRequestf(format string, a ...any) error {
	return &BadRequestError{Msg: fmt.Sprintf(format, a...)}
}

func conflictf(format string, a ...any) error {
	return &ConflictError{Msg: fmt.Sprintf(format, a...)}
}

func hostSetupf(format string, a ...any) error {
	return &HostSetupError{Msg: fmt.Sprintf(format, a...)}
}
