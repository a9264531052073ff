package driver

import "regexp"

var idRE = regexp.MustCompile(`^[A-Za-z0-9]{1,64}$`)

// checkID refuses IDs that are not what Docker generates (hex, or swarm's
// base-36 IDs): IDs name state files and links.
func checkID(kind, id string) error {
	if !idRE.MatchString(id) {
		return invalidf("invalid %s ID %q: expected 1 to 64 letters and digits as Docker generates them", kind, truncate(id, 80))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// LinkPrefix starts the name of every link the driver creates for an endpoint.
const LinkPrefix = "rmv"

// LinkName is the host-side name of the macvlan link of endpoint eid: the
// prefix and the first 12 characters of the ID, 15 bytes at most (IFNAMSIZ-1),
// so that delete and restart find it again.
func LinkName(eid string) string {
	if len(eid) > 12 {
		eid = eid[:12]
	}
	return LinkPrefix + eid
}

// ShortID shortens an ID for logs.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
