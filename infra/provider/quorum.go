package provider

import (
	"context"
	"fmt"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/homelab-dev/homelab/infra/ssh"
)

// memberHealth is one etcd member as a removal must see it.
type memberHealth struct {
	ID      uint64
	Name    string
	PeerURL string
	// Started: the member ran (a name is set once it starts; an added
	// member that never started has none).
	Started bool
	// Healthy: it answered a status request with a leader and no errors.
	Healthy bool
	// Learner: not yet a voting member (kubeadm adds members as learners).
	Learner bool
}

// removalProblem says why removing member id would be unsafe, "" when it
// is safe: never the last member, never one that leaves fewer healthy
// members than the smaller cluster's quorum (etcd would then stop
// accepting writes, and with them the API).
func removalProblem(members []memberHealth, id uint64) string {
	found, left, healthyLeft := false, 0, 0
	for _, m := range members {
		if m.Learner {
			if m.ID == id {
				return "" // not voting: quorum does not count it
			}
			continue
		}
		if m.ID == id {
			found = true
			continue
		}
		left++
		if m.Healthy {
			healthyLeft++
		}
	}
	if !found {
		return ""
	}
	if left == 0 {
		return "it is etcd's last member"
	}
	if quorum := left/2 + 1; healthyLeft < quorum {
		return fmt.Sprintf("it would leave %d healthy of %d members, below the quorum of %d: etcd would stop serving writes, and with them the API; bring the other members back first", healthyLeft, left, quorum)
	}
	return ""
}

// readMembers lists the members, with their health when asked (each asked
// at its own client URL, through whatever dialer cli uses: the SSH
// tunnel).
func readMembers(ctx context.Context, cli *clientv3.Client, health bool) ([]memberHealth, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var out []memberHealth
	for _, m := range resp.Members {
		mh := memberHealth{ID: m.ID, Name: m.Name, Started: m.Name != "", Learner: m.IsLearner}
		if len(m.PeerURLs) > 0 {
			mh.PeerURL = m.PeerURLs[0]
		}
		if health && mh.Started && len(m.ClientURLs) > 0 {
			sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
			s, err := cli.Status(sctx, m.ClientURLs[0])
			scancel()
			mh.Healthy = err == nil && s.Leader != 0 && len(s.Errors) == 0
		}
		out = append(out, mh)
	}
	return out, nil
}

// removeMember removes one member after checking it is allowed: a started
// member needs the user's consent for its node, unless it is the dead
// member of a replaced machine (replacing: its data went with the old
// disk); the removal must leave quorum; and it is the only removal of
// this up.
func removeMember(ctx context.Context, cli *clientv3.Client, tunnel ssh.Executor, m memberHealth, replacing bool) error {
	members, err := readMembers(ctx, cli, true)
	if err != nil {
		return fmt.Errorf("reading etcd's members: %w", err)
	}
	for _, live := range members {
		if live.ID == m.ID {
			m = live
		}
	}
	who := m.Name
	if who == "" {
		who = m.PeerURL
	}
	if m.Started && !consented(ctx, m.Name) && !(replacing && !m.Healthy) {
		state := "a started"
		if m.Healthy {
			state = "a healthy"
		}
		return refused(m.Name, "removing etcd member "+who, "remove "+state+" etcd member (its copy of the cluster's data goes, and quorum shrinks)")
	}
	if problem := removalProblem(members, m.ID); problem != "" {
		return fmt.Errorf("refusing to remove etcd member %s: %s", who, problem)
	}
	// At most one removal per up, so a wrong inventory can never walk
	// etcd down member by member in one go. Consent for every node
	// (destroy) is consent to do that; quorum still holds at every step.
	removals := configOf(ctx).memberRemovals
	if n := removals.Add(1); n > 1 && !consented(ctx, "*") {
		removals.Add(-1)
		return fmt.Errorf("etcd member %s is left in place: one member change per up keeps etcd's quorum safe; run up again to remove it", who)
	}
	p.GetLogger(ctx).Warningf("removing etcd member %s (%s)", who, m.PeerURL)
	if err := tunnel.Note(fmt.Sprintf("etcd member remove %x %s (%s)", m.ID, m.Name, m.PeerURL)); err != nil {
		removals.Add(-1)
		return err
	}
	if _, err := cli.MemberRemove(ctx, m.ID); err != nil {
		removals.Add(-1)
		return fmt.Errorf("removing etcd member %s: %w", who, err)
	}
	return nil
}
