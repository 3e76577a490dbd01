package doctor

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCompareSANs(t *testing.T) {
	missing, extra := compareSANs([]string{"10.0.0.120", "::1", "cp-1"}, []string{"10.0.0.140", "cp-1"}, []string{"::1"})
	if !slices.Equal(missing, []string{"10.0.0.140"}) || !slices.Equal(extra, []string{"10.0.0.120"}) {
		t.Errorf("missing %v extra %v", missing, extra)
	}
}

func TestFlagsAndAddresses(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Command: []string{"etcd",
		"--listen-client-urls=https://127.0.0.1:2379,https://10.0.0.120:2379", "--name=cp-1"}}}}}
	f := flags(pod)
	if f["name"] != "cp-1" {
		t.Errorf("flags: %v", f)
	}
	if got := addressesIn(f["listen-client-urls"]); !slices.Equal(got, []string{"10.0.0.120"}) {
		t.Errorf("addresses (loopback left out): %v", got)
	}
}

func TestReportOK(t *testing.T) {
	r := &Report{}
	r.add("node", "cp-1", Warn, "x")
	if !r.OK() {
		t.Error("a warning failed the report")
	}
	r.add("node", "cp-1", Fail, "y")
	if r.OK() || len(r.Failed()) != 1 {
		t.Error("a failure did not fail the report")
	}
}
