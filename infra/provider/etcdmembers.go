package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/homelab-dev/homelab/infra/etcdclient"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// EtcdMembers keeps etcd's membership equal to the control-plane nodes:
// each member's name and peer URL as declared. A member whose node was
// re-addressed gets its peer URL updated; a member of a node that is gone
// or was rebuilt is removed (kubeadm #2095: a rebuilt node cannot re-join
// while its stale member exists).
type EtcdMembers struct{}

type EtcdMember struct {
	Name    string `pulumi:"name"`
	PeerURL string `pulumi:"peerURL"`
}

type EtcdMembersArgs struct {
	// Via lists control-plane nodes; the first that answers is used. etcd
	// is reached through an SSH tunnel to its loopback client port, with
	// the apiserver's etcd client certificate read from that node.
	Via     []Connection `pulumi:"via"`
	Members []EtcdMember `pulumi:"members"`
}

type EtcdMembersState struct {
	EtcdMembersArgs
	Live []EtcdMember `pulumi:"live,optional"`
}

func (e *EtcdMembers) Annotate(a infer.Annotator) {
	a.Describe(&e, "etcd's member list, kept equal to the control-plane nodes.")
	a.SetToken("index", "EtcdMembers")
}

// withEtcd runs fn with a client to etcd on the first reachable node.
func withEtcd(ctx context.Context, via []Connection, fn func(cli *clientv3.Client, tunnel ssh.Executor) error) error {
	var errs []error
	for _, conn := range via {
		err := func() error {
			c, err := dial(ctx, conn)
			if err != nil {
				return err
			}
			defer c.Close()
			cli, err := etcdThrough(ctx, c)
			if err != nil {
				return fmt.Errorf("%s: %w", conn.Node, err)
			}
			defer cli.Close()
			return fn(cli, c)
		}()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no control-plane node's etcd answered: %v", errs)
}

// etcdThrough is a client of the node's own etcd member through the SSH
// connection (infra/etcdclient, shared with the CLI's etcd commands).
func etcdThrough(ctx context.Context, c ssh.Executor) (*clientv3.Client, error) {
	return etcdclient.ThroughSSH(ctx, c)
}

// plain is the member list as the state records it, by name.
func plain(ms []memberHealth) []EtcdMember {
	out := []EtcdMember{}
	for _, m := range ms {
		out = append(out, EtcdMember{Name: m.Name, PeerURL: m.PeerURL})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// convergeMembers fixes peer URLs and removes members that are not
// declared: one removal at most, checked against quorum, and a started
// member only with the user's consent for its node (removeMember). A
// member that has not started yet (empty name) is left alone: it is a join
// in progress.
func convergeMembers(ctx context.Context, in EtcdMembersArgs) ([]EtcdMember, error) {
	var live []memberHealth
	err := withEtcd(ctx, in.Via, func(cli *clientv3.Client, tunnel ssh.Executor) error {
		ms, err := readMembers(ctx, cli, false)
		if err != nil {
			return err
		}
		want := map[string]string{}
		for _, m := range in.Members {
			want[m.Name] = m.PeerURL
		}
		var errs []error
		for _, m := range ms {
			url, declared := want[m.Name]
			switch {
			case m.Name == "":
			case !declared:
				p.GetLogger(ctx).Warningf("etcd member %s (%s) belongs to no declared control-plane node", m.Name, m.PeerURL)
				if err := removeMember(ctx, cli, tunnel, m, false); err != nil {
					errs = append(errs, err)
				}
			case url != m.PeerURL:
				p.GetLogger(ctx).Infof("etcd member %s: peer URL %s -> %s", m.Name, m.PeerURL, url)
				if err := tunnel.Note(fmt.Sprintf("etcd member update %x %s: peer URL %s -> %s", m.ID, m.Name, m.PeerURL, url)); err != nil {
					return err
				}
				if _, err := cli.MemberUpdate(ctx, m.ID, []string{url}); err != nil {
					return fmt.Errorf("updating etcd member %s: %w", m.Name, err)
				}
			}
		}
		live, err = readMembers(ctx, cli, false)
		return errors.Join(append(errs, err)...)
	})
	return plain(live), err
}

func (EtcdMembers) Create(ctx context.Context, req infer.CreateRequest[EtcdMembersArgs]) (infer.CreateResponse[EtcdMembersState], error) {
	st := EtcdMembersState{EtcdMembersArgs: req.Inputs, Live: req.Inputs.Members}
	if req.DryRun {
		return infer.CreateResponse[EtcdMembersState]{ID: "etcd", Output: st}, nil
	}
	live, err := convergeMembers(ctx, req.Inputs)
	st.Live = live
	return infer.CreateResponse[EtcdMembersState]{ID: "etcd", Output: st}, err
}

// etcdMembersRead keeps the last known members whatever kept etcd from
// being read. The list is the cluster's, read through whichever of the
// latest inputs' nodes answers: a node refusing the key is refusing the
// current key too, and says nothing about the members; and Update converges
// from a list it reads itself.
var etcdMembersRead = keepLastState[EtcdMembersState]()

func (EtcdMembers) Read(ctx context.Context, req infer.ReadRequest[EtcdMembersArgs, EtcdMembersState]) (infer.ReadResponse[EtcdMembersArgs, EtcdMembersState], error) {
	ctx = reading(ctx)
	// The latest inputs' nodes: which nodes etcd is reached through is no
	// change (Diff ignores it), so the state may hold an older list.
	via := req.Inputs.Via
	if len(via) == 0 {
		via = req.State.Via
	}
	st, err := readAny(ctx, "etcd", via, req.State, etcdMembersRead, func(c ssh.Executor) (EtcdMembersState, error) {
		st := req.State
		cli, err := etcdThrough(ctx, c)
		if err != nil {
			return st, unanswered(err)
		}
		defer cli.Close()
		ms, err := readMembers(ctx, cli, false)
		if err != nil {
			return st, unanswered(err)
		}
		st.Live = plain(ms)
		return st, nil
	})
	if err != nil {
		return infer.ReadResponse[EtcdMembersArgs, EtcdMembersState]{}, err
	}
	return infer.ReadResponse[EtcdMembersArgs, EtcdMembersState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

func sortedMembers(ms []EtcdMember) []EtcdMember {
	out := slices.Clone(ms)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// membersDiffer reports whether a member list is other than declared.
func membersDiffer(in EtcdMembersArgs, ms []EtcdMember) bool {
	return !slices.Equal(sortedMembers(in.Members), sortedMembers(ms))
}

// etcdMembersChanges: the members change when etcd's live list or the
// last declaration differs from the declaration. Only the live list
// costs etcd a change: a declaration that came to match it (a member's
// new peer URL already in place) is recorded, nothing more.
func etcdMembersChanges(in EtcdMembersArgs, st EtcdMembersState) changeSet {
	d := changeSet{}
	if membersDiffer(in, st.Live) || membersDiffer(in, st.Members) {
		d.update("members")
	}
	return d
}

func (EtcdMembers) Diff(ctx context.Context, req infer.DiffRequest[EtcdMembersArgs, EtcdMembersState]) (infer.DiffResponse, error) {
	return etcdMembersChanges(req.Inputs, req.State).diff(false), nil
}

func (EtcdMembers) Update(ctx context.Context, req infer.UpdateRequest[EtcdMembersArgs, EtcdMembersState]) (infer.UpdateResponse[EtcdMembersState], error) {
	st := EtcdMembersState{EtcdMembersArgs: req.Inputs, Live: req.Inputs.Members}
	if req.DryRun || !membersDiffer(req.Inputs, req.State.Live) {
		if !req.DryRun {
			st.Live = req.State.Live
		}
		return infer.UpdateResponse[EtcdMembersState]{Output: st}, nil
	}
	live, err := convergeMembers(ctx, req.Inputs)
	st.Live = live
	return infer.UpdateResponse[EtcdMembersState]{Output: st}, err
}
