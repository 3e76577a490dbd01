package provider

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/ssh"
)

// A read cancelled while its batch runs fails alone: the others batched
// with it, the first read among them included, get their values. Only
// when every read is cancelled does the command stop.
func TestACancelledReadFailsAlone(t *testing.T) {
	for _, cancelFirst := range []bool{true, false} {
		started := make(chan struct{})
		release := make(chan struct{})
		b := newBatcher(8, func(ctx context.Context, _ ssh.Executor, keys []string) (map[string]string, error) {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			vals := map[string]string{}
			for _, k := range keys {
				vals[k] = "value of " + k
			}
			return vals, nil
		})
		conn := Connection{Node: "cp-1"}
		firstCtx, cancelFirstRead := context.WithCancel(context.Background())
		otherCtx, cancelOther := context.WithCancel(context.Background())
		defer cancelOther()
		type result struct {
			v   string
			err error
		}
		var wg sync.WaitGroup
		results := make([]result, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _, err := b.get(firstCtx, conn, nil, "a")
			results[0] = result{v, err}
		}()
		time.Sleep(10 * time.Millisecond) // "a" leads the batch
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _, err := b.get(otherCtx, conn, nil, "b")
			results[1] = result{v, err}
		}()
		<-started
		if cancelFirst {
			cancelFirstRead()
		} else {
			cancelOther()
		}
		time.Sleep(20 * time.Millisecond)
		close(release)
		wg.Wait()
		cancelled, alive := results[0], results[1]
		if !cancelFirst {
			cancelled, alive = results[1], results[0]
		}
		if !errors.Is(cancelled.err, context.Canceled) {
			t.Errorf("cancel first %v: the cancelled read: %+v", cancelFirst, cancelled)
		}
		if alive.err != nil || alive.v == "" {
			t.Errorf("cancel first %v: the read batched with a cancelled one: %+v", cancelFirst, alive)
		}
		cancelFirstRead()
	}

	// Every read cancelled: the command stops.
	stopped := make(chan struct{})
	b := newBatcher(8, func(ctx context.Context, _ ssh.Executor, keys []string) (map[string]string, error) {
		<-ctx.Done()
		close(stopped)
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(80 * time.Millisecond); cancel() }()
	if _, _, err := b.get(ctx, Connection{Node: "cp-1"}, nil, "a"); !errors.Is(err, context.Canceled) {
		t.Errorf("the only read, cancelled: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Error("the command runs on with every read cancelled")
	}
}
