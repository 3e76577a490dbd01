package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/ssh"
)

func TestManifestLifecycle(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	cp1 := lab.node("cp-1")
	var applied []string
	exists, apiDown := false, false
	cp1.onScriptFunc("manifest/apply", func(string) (ssh.Result, error) {
		applied = append(applied, cp1.events[len(cp1.events)-1].stdin)
		exists = true
		return ssh.Result{}, nil
	})
	cp1.onScriptFunc("manifest/get", func(cmd string) (ssh.Result, error) {
		switch {
		case !strings.Contains(cmd, " get 'RuntimeClass' 'nvidia' -o name"):
			t.Errorf("asked about another object: %q", cmd)
			return ssh.Result{ExitCode: 1}, nil
		case apiDown:
			return ssh.Result{ExitCode: 1}, nil
		case exists:
			return ssh.Result{Stdout: []byte("runtimeclass.node.k8s.io/nvidia\n")}, nil
		}
		return ssh.Result{}, nil
	})
	cp1.onScriptFunc("manifest/delete", func(cmd string) (ssh.Result, error) {
		if !strings.Contains(cmd, " delete 'RuntimeClass' 'nvidia' --ignore-not-found") {
			t.Errorf("deleted another object: %q", cmd)
			return ssh.Result{ExitCode: 1}, nil
		}
		exists = false
		return ssh.Result{}, nil
	})
	in := ManifestArgs{Via: lab.conn("cp-1"), Kind: "RuntimeClass", Name: "nvidia", Content: "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: nvidia}\nhandler: nvidia\n"}

	created, err := (Manifest{}).Create(ctx, infer.CreateRequest[ManifestArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	// The content goes on stdin, never on a command line.
	if !slices.Equal(applied, []string{in.Content}) || cp1.asked("handler: nvidia") {
		t.Errorf("applied %q", applied)
	}
	st := refresh(t, ctx, Manifest{}, in, created.Output)
	if d := diffKeys(t, Manifest{}, in, st); !st.Exists || len(d) > 0 {
		t.Errorf("exists %v, changes %v", st.Exists, d)
	}

	// The API down: the last state stands.
	apiDown = true
	if st := refresh(t, ctx, Manifest{}, in, st); !st.Exists {
		t.Error("the API down made the object absent")
	}
	apiDown = false

	// Deleted by hand: applied again.
	exists = false
	st = refresh(t, ctx, Manifest{}, in, st)
	if d := diffKeys(t, Manifest{}, in, st); !slices.Equal(d, []string{"content"}) {
		t.Errorf("deleted by hand: %v", d)
	}
	if _, err := (Manifest{}).Update(ctx, infer.UpdateRequest[ManifestArgs, ManifestState]{Inputs: in, State: st}); err != nil || len(applied) != 2 || !exists {
		t.Errorf("re-apply: %v, applied %d times", err, len(applied))
	}

	if _, err := (Manifest{}).Delete(ctx, infer.DeleteRequest[ManifestState]{ID: "id", State: st}); err != nil || exists {
		t.Errorf("delete: %v, exists %v", err, exists)
	}
}
