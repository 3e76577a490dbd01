package provider

import (
	"context"
	"errors"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/homelab-dev/homelab/infra/ssh"
)

// A Read asks the node what is live. When the node cannot say, the Read
// still has to record something, and what is right differs by resource and
// by why the node could not say: readNode makes that one decision, from the
// resource's readPolicy, so every resource's choice is written where it can
// be seen and compared.

// readFailure is why a Read could not see its node.
type readFailure int

const (
	// nodeUnreachable: the node did not answer (off, moved, rebooting), or
	// showed a host key known_hosts has no entry for yet.
	nodeUnreachable readFailure = iota
	// keyRefused: the node answered and refused the SSH key the state
	// was made with (the key was changed, or the machine rebuilt).
	keyRefused
	// hostKeyChanged: the node showed another host key than known_hosts
	// has for it: another machine, or an attack.
	hostKeyChanged
	// notAnswered: the node was reached, but what the Read asked through
	// it went unanswered (the cluster's API down while a control plane is
	// repaired). Only errors the read marks with unanswered.
	notAnswered
)

func (f readFailure) String() string {
	switch f {
	case keyRefused:
		return "refused the SSH key this state was made with (a new key, or a rebuilt machine)"
	case hostKeyChanged:
		return "showed a changed host key"
	case notAnswered:
		return "was reached but did not answer"
	}
	return "unreachable"
}

// failureOf sorts an error of dial, or one a read marked unanswered.
func failureOf(err error) readFailure {
	var un *unansweredError
	var changed *ssh.HostKeyChangedError
	switch {
	case errors.As(err, &un):
		return notAnswered
	case errors.As(err, &changed):
		return hostKeyChanged
	case ssh.AuthFailed(err):
		return keyRefused
	}
	return nodeUnreachable
}

type unansweredError struct{ err error }

func (e *unansweredError) Error() string { return e.err.Error() }
func (e *unansweredError) Unwrap() error { return e.err }

// unanswered marks an error of a read as the policy's notAnswered case;
// any other error of a read fails it.
func unanswered(err error) error { return &unansweredError{err} }

// readAction is what a Read records instead of the live state.
type readAction int

const (
	// keepLast: the last known state stands. Nothing is assumed gone
	// because a node is off, and one powered-off node does not fail a
	// whole refresh.
	keepLast readAction = iota
	// markUnknown: the policy's Unknown state, whose Diff shows a change,
	// so the step runs, and it looks at the node before it acts.
	markUnknown
	// failRead: the Read fails, and the refresh with it.
	failRead
)

// readPolicy is what a resource's Read records for each readFailure.
type readPolicy[S any] struct {
	Unreachable, KeyRefused, HostKeyChanged, NotAnswered readAction
	// Unknown is the state markUnknown records, made from the last one:
	// its live fields reset to what Diff shows as a change.
	Unknown func(last S) S
}

func (pol readPolicy[S]) on(f readFailure) readAction {
	switch f {
	case keyRefused:
		return pol.KeyRefused
	case hostKeyChanged:
		return pol.HostKeyChanged
	case notAnswered:
		return pol.NotAnswered
	}
	return pol.Unreachable
}

// keepOrRecheck is the policy of most resources. A node that does not
// answer keeps its last known state. One that answers but refuses the
// stored key may be anything by now (a rebuilt homelab under old state):
// its state is unknown, so the step re-checks it with the current key. A
// changed host key keeps the last state here, as an unreachable node
// would: Host's Read fails the refresh on it, naming the node and the fix.
func keepOrRecheck[S any](unknown func(last S) S) readPolicy[S] {
	return readPolicy[S]{Unreachable: keepLast, KeyRefused: markUnknown, HostKeyChanged: keepLast, NotAnswered: keepLast, Unknown: unknown}
}

// keepLastState keeps the last known state whatever kept the node from
// being read. Only for resources whose Diff or Update does not depend on
// the state being current (each says why).
func keepLastState[S any]() readPolicy[S] {
	return readPolicy[S]{Unreachable: keepLast, KeyRefused: keepLast, HostKeyChanged: keepLast, NotAnswered: keepLast}
}

// readNode reads a resource's live state on the node conn names: read runs
// with an Executor on it. When the node cannot be read (dial fails, or read
// returns an error marked unanswered), pol decides what stands instead of
// the live state: last, pol.Unknown(last), or the error. Any other error of
// read fails the Read.
func readNode[S any](ctx context.Context, conn Connection, last S, pol readPolicy[S], read func(ex ssh.Executor) (S, error)) (S, error) {
	st, err, unread := readOnce(ctx, conn, read)
	if unread {
		f := failureOf(err)
		return pol.act(ctx, conn.Node, last, pol.on(f), f, err)
	}
	return st, err
}

// readAny is readNode for state the cluster holds, which any of conns can
// be asked for (etcd's members): the first node read wins, and one that
// cannot be read hands over to the next. When none can be, the gravest
// action a failure asks for is taken, once.
func readAny[S any](ctx context.Context, what string, conns []Connection, last S, pol readPolicy[S], read func(ex ssh.Executor) (S, error)) (S, error) {
	var errs []error
	worst, why := keepLast, nodeUnreachable
	for _, conn := range conns {
		st, err, unread := readOnce(ctx, conn, read)
		if !unread {
			return st, err
		}
		f := failureOf(err)
		switch a := pol.on(f); {
		case a == failRead:
			return last, err
		case a > worst:
			worst, why = a, f
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no node to read it through"))
	}
	return pol.act(ctx, what, last, worst, why, errors.Join(errs...))
}

// readOnce runs read on the node; unread says the node could not be read
// (err is then for the policy), as opposed to read's own verdict.
func readOnce[S any](ctx context.Context, conn Connection, read func(ex ssh.Executor) (S, error)) (st S, err error, unread bool) {
	ex, err := dial(reading(ctx), conn)
	if err != nil {
		return st, err, true
	}
	defer ex.Close()
	st, err = read(ex)
	var un *unansweredError
	return st, err, errors.As(err, &un)
}

// act records a instead of the live state that f kept from being read,
// and logs why.
func (pol readPolicy[S]) act(ctx context.Context, who string, last S, a readAction, f readFailure, err error) (S, error) {
	switch a {
	case failRead:
		return last, err
	case markUnknown:
		how := "its live state is re-checked before the step acts"
		if f == keyRefused {
			how = "its live state is re-checked with the current key"
		}
		p.GetLogger(ctx).Warningf("%s %s: %s: %v", who, f, how, err)
		return pol.Unknown(last), nil
	}
	p.GetLogger(ctx).Warningf("%s %s, keeping its last known state: %v", who, f, err)
	return last, nil
}

// logUnread says that a step other than a Read went on without reading a
// node, and what that leaves.
func logUnread(ctx context.Context, node string, err error, leaves string) {
	p.GetLogger(ctx).Warningf("%s %s: %s: %v", node, failureOf(err), leaves, err)
}
