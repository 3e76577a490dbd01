package lab

import "fmt"

// Cut pulls a node's network cable: the bridge end of its veth goes down,
// so the node's interface loses its carrier (NO-CARRIER, as with an
// unplugged cable or a dead switch port) while every process on the node
// keeps running. Nothing reaches the node and the node reaches nothing:
// the cluster is split, not short of a node.
func (l *Lab) Cut(name string) error {
	return l.withNode(name, func(s *State, n *NodeState) error {
		if n.Power != powerOn {
			return fmt.Errorf("%s is off: there is no cable to pull", name)
		}
		if n.Cut {
			l.logf("lab: %s is already cut off", name)
			return nil
		}
		if err := ip("-n", s.Names().Bridge(), "link", "set", n.Link, "down"); err != nil {
			return err
		}
		n.Cut = true
		return l.saveState(s)
	})
}

// Uncut plugs the cable back in: the carrier returns, the node's
// addresses and routes are as they were (nothing on the node changed).
func (l *Lab) Uncut(name string) error {
	return l.withNode(name, func(s *State, n *NodeState) error {
		if n.Power != powerOn {
			return fmt.Errorf("%s is off", name)
		}
		if !n.Cut {
			l.logf("lab: %s is not cut off", name)
			return nil
		}
		if err := ip("-n", s.Names().Bridge(), "link", "set", n.Link, "up"); err != nil {
			return err
		}
		n.Cut = false
		return l.saveState(s)
	})
}
