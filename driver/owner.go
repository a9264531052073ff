package driver

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/sirupsen/logrus"
)

// Ownership. A daemon instance (one state directory) marks everything it
// creates on the host with its owner mark, "rdma-macvlan <instance ID>":
// container links and VLAN sub-interfaces carry it as their ifalias, CDI
// specs as their rdma-macvlan/owner annotation. It deletes or replaces only
// objects with its mark. Anything else under a name it needs is a conflict,
// refused with an error that names the object and the fix; it is never
// deleted. Objects of the one release before the mark (VLAN sub-interfaces
// its records say it created, CDI specs) carry no mark and are adopted.

// ownerMark is the mark of the instance with ID id.
func ownerMark(id string) string { return "rdma-macvlan " + id }

// recoverInstanceID finds the ID of a state directory whose instance file
// is lost, from the marks of the links its records name in the host
// namespace: container links not in a container and the VLAN
// sub-interfaces its networks made. It returns "" when the records name
// no such link, or links with different marks. Without it, a lost file
// would give a new ID, and the instance would no longer own its links.
func recoverInstanceID(st *store, links Links, log *logrus.Entry) string {
	nets, eps, problems, err := st.load()
	// Set aside here, so restore would not see them again.
	for _, p := range problems {
		log.WithError(p.Err).WithField("file", p.Path).Error("state file unusable; set aside, the objects in it are forgotten")
	}
	if err != nil || len(nets)+len(eps) == 0 {
		return ""
	}
	named := map[string]bool{}
	for _, e := range eps {
		named[e.Ifname] = true
	}
	for _, n := range nets {
		if n.VLAN != nil && n.VLAN.Created {
			named[n.Parent] = true
		}
	}
	all, err := links.Links()
	if err != nil {
		return ""
	}
	found := ""
	for _, l := range all {
		id, ok := strings.CutPrefix(l.Alias, ownerMark(""))
		if !named[l.Name] || !ok || !idRE.MatchString(id) {
			continue
		}
		if found != "" && found != id {
			return ""
		}
		found = id
	}
	return found
}

// clearStaleLink makes way for a new container link called name: a link of
// that name this instance made (a crash left it) is deleted; any other is a
// conflict.
func (d *Driver) clearStaleLink(name string) error {
	l, err := d.links.LinkByName(name)
	switch {
	case errors.Is(err, netns.ErrLinkNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("look up link %s: %w", name, err)
	case l.Kind != "macvlan" || l.Alias != d.owner:
		return conflictf("link %s exists and was not made by this rdma-macvlan instance (kind %s, ifalias %q, not %q): delete it if nothing uses it (ip link del %s), then start the container again",
			name, l.Kind, l.Alias, d.owner, name)
	}
	if err := d.links.DeleteLink(name); err != nil {
		return fmt.Errorf("remove stale link %s: %w", name, err)
	}
	return nil
}
