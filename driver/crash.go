package driver

// crashHook is called at every crashPoint. It is nil except in builds with
// the crashpoints tag, where the reliability tests use it to kill the daemon
// at each step that changes state (see crash_hook.go).
var crashHook func(name string)

// CrashPoints names every step after which the daemon may die mid-call; the
// crash tests kill it at each one and check that a restart finishes or
// undoes the work.
var CrashPoints = []string{
	"create-network:vlan-created",
	"create-network:cdi-written",
	"create-network:state-written",
	"delete-network:vlan-deleted",
	"delete-network:state-deleted",
	"create-endpoint:link-created",
	"create-endpoint:state-written",
	"join:link-recreated",
	"join:state-written",
	"leave:state-written",
	"delete-endpoint:link-deleted",
	"delete-endpoint:state-deleted",
	"store:temp-written",
}

func crashPoint(name string) {
	if crashHook != nil {
		crashHook(name)
	}
}
