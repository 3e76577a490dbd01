package pods

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func agentPod() *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "install-cni-binaries", Image: "quay.io/cilium/cilium:v1.18.4"}},
		Containers:     []corev1.Container{{Name: "cilium-agent", Image: "quay.io/cilium/cilium:v1.18.4"}},
	}}
}

func cond(st corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// Ready only when the containers run; a crash loop is Running, not Ready;
// a pod without its sandbox is Pending and has no address.
func TestStatus(t *testing.T) {
	now := time.Now()
	started := now.Add(-time.Minute)
	cases := []struct {
		name        string
		v           View
		phase       corev1.PodPhase
		ready       corev1.ConditionStatus
		sandbox     corev1.ConditionStatus
		podIP       string
		containerIn string // the main container's state: running or the waiting reason
	}{
		{"network not ready", View{NodeIP: "10.0.0.5", Waiting: "ContainerCreating"},
			corev1.PodPending, corev1.ConditionFalse, corev1.ConditionFalse, "", "PodInitializing"},
		{"sandbox up, containers starting", View{NodeIP: "10.0.0.5", Sandbox: true, PodIP: "10.244.1.2", Waiting: "ContainerCreating"},
			corev1.PodPending, corev1.ConditionFalse, corev1.ConditionTrue, "10.244.1.2", "PodInitializing"},
		{"running", View{NodeIP: "10.0.0.5", Sandbox: true, PodIP: "10.0.0.5", Started: started},
			corev1.PodRunning, corev1.ConditionTrue, corev1.ConditionTrue, "10.0.0.5", "running"},
		{"crash loop", View{NodeIP: "10.0.0.5", Sandbox: true, PodIP: "10.0.0.5", Restarts: 2, LastExit: "unable to contact k8s api-server", Waiting: "CrashLoopBackOff"},
			corev1.PodRunning, corev1.ConditionFalse, corev1.ConditionTrue, "10.0.0.5", "CrashLoopBackOff"},
		{"missing ConfigMap in the environment", View{NodeIP: "10.0.0.5", Sandbox: true, PodIP: "10.0.0.5", Waiting: "CreateContainerConfigError", WaitingMessage: `configmap "x" not found`},
			corev1.PodPending, corev1.ConditionFalse, corev1.ConditionTrue, "10.0.0.5", "CreateContainerConfigError"},
	}
	for _, tc := range cases {
		st := Status(agentPod(), tc.v, now)
		cs := st.ContainerStatuses[0]
		state := "running"
		if cs.State.Waiting != nil {
			state = cs.State.Waiting.Reason
		}
		if st.Phase != tc.phase || cond(st, corev1.PodReady) != tc.ready || cond(st, corev1.ContainersReady) != tc.ready ||
			cond(st, corev1.PodReadyToStartContainers) != tc.sandbox || st.PodIP != tc.podIP || state != tc.containerIn || cs.Ready != (tc.ready == corev1.ConditionTrue) {
			t.Errorf("%s: phase %s ready %s sandbox %s ip %q container %s", tc.name, st.Phase, cond(st, corev1.PodReady),
				cond(st, corev1.PodReadyToStartContainers), st.PodIP, state)
		}
		if tc.v.Restarts > 0 && (cs.RestartCount != int32(tc.v.Restarts) || cs.LastTerminationState.Terminated == nil) {
			t.Errorf("%s: restarts %d, last state %+v", tc.name, cs.RestartCount, cs.LastTerminationState)
		}
		if (st.InitContainerStatuses[0].State.Terminated != nil) != (tc.containerIn == "running") {
			t.Errorf("%s: init container %+v", tc.name, st.InitContainerStatuses[0].State)
		}
	}
	// Transition times stay while a condition keeps its status.
	p := agentPod()
	p.Status = Status(p, View{Sandbox: true, Started: started}, now.Add(-time.Hour))
	again := Status(p, View{Sandbox: true, Started: started}, now)
	for i, c := range again.Conditions {
		if !c.LastTransitionTime.Equal(&p.Status.Conditions[i].LastTransitionTime) {
			t.Errorf("%s: transition time moved", c.Type)
		}
	}
}

func TestBackoff(t *testing.T) {
	for restarts, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 4: 80 * time.Second, 6: 5 * time.Minute, 20: 5 * time.Minute} {
		if got := backoff(restarts); got != want {
			t.Errorf("backoff(%d) = %s, want %s", restarts, got, want)
		}
	}
}

func TestVolumeAndConfigProblems(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "var/lib/kubelet/device-plugins"), 0o755)
	exists := map[string]bool{"configmap/kube-system/cilium-config": true, "configmap/kube-system/kube-root-ca.crt": true}
	lookup := func(kind, ns, name string) (bool, error) { return exists[kind+"/"+ns+"/"+name], nil }
	hp := func(path string, t corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}}}
	}
	cm := func(name string, optional bool) corev1.Volume {
		return corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: ptr.To(optional)}}}
	}
	projected := corev1.Volume{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}}
	cases := []struct {
		name   string
		vols   []corev1.Volume
		errHas string
	}{
		{"present ConfigMap and projected token", []corev1.Volume{cm("cilium-config", false), projected}, ""},
		{"missing ConfigMap", []corev1.Volume{cm("nope", false)}, `MountVolume.SetUp failed for volume "cm" : configmap "nope" not found`},
		{"missing optional ConfigMap", []corev1.Volume{cm("nope", true)}, ""},
		{"missing Secret", []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hubble-tls"}}}}, `secret "hubble-tls" not found`},
		{"hostPath directory present", []corev1.Volume{hp("/var/lib/kubelet/device-plugins", corev1.HostPathDirectory)}, ""},
		{"hostPath directory absent", []corev1.Volume{hp("/var/run/nvidia", corev1.HostPathDirectory)}, "/var/run/nvidia is not a directory"},
		{"hostPath socket absent", []corev1.Volume{hp("/run/x.sock", corev1.HostPathSocket)}, "is not a socket file"},
		{"DirectoryOrCreate made", []corev1.Volume{hp("/var/run/cilium", corev1.HostPathDirectoryOrCreate), hp("/var/run/cilium", corev1.HostPathDirectory)}, ""},
		{"FileOrCreate made", []corev1.Volume{hp("/var/run/cilium/xtables.lock", corev1.HostPathFileOrCreate), hp("/var/run/cilium/xtables.lock", corev1.HostPathFile)}, ""},
	}
	for _, tc := range cases {
		p := &corev1.Pod{Spec: corev1.PodSpec{Volumes: tc.vols}}
		p.Namespace = "kube-system"
		err := VolumeProblem(p, lookup, root)
		if (tc.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.errHas)
		}
	}
	env := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
		{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cilium-config"}, Key: "k"}}},
		{Name: "B", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Key: "k", Optional: ptr.To(true)}}},
	}}}}}
	env.Namespace = "kube-system"
	if err := ConfigProblem(env, lookup); err != nil {
		t.Errorf("present and optional references: %v", err)
	}
	env.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
	if err := ConfigProblem(env, lookup); err == nil || !strings.Contains(err.Error(), `secret "creds" not found`) {
		t.Errorf("missing envFrom Secret: %v", err)
	}
}

func TestConditionsDiffer(t *testing.T) {
	c := func(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s}
	}
	want := []corev1.PodCondition{c(corev1.PodReady, corev1.ConditionTrue), c(corev1.ContainersReady, corev1.ConditionTrue)}
	for _, tc := range []struct {
		name   string
		live   []corev1.PodCondition
		differ bool
	}{
		{"the same", []corev1.PodCondition{c(corev1.ContainersReady, corev1.ConditionTrue), c(corev1.PodReady, corev1.ConditionTrue)}, false},
		{"another writer's extra condition", append([]corev1.PodCondition{c("DisruptionTarget", corev1.ConditionTrue)}, want...), false},
		{"marked not ready", []corev1.PodCondition{c(corev1.PodReady, corev1.ConditionFalse), c(corev1.ContainersReady, corev1.ConditionTrue)}, true},
		{"a condition gone", []corev1.PodCondition{c(corev1.PodReady, corev1.ConditionTrue)}, true},
		{"none yet", nil, true},
	} {
		if got := ConditionsDiffer(tc.live, want); got != tc.differ {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.differ)
		}
	}
}
