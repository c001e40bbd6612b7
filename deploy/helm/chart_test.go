// Package helm tests galago's Helm chart with helm's own packages: lint,
// render with the default and with custom values, decode every rendered
// object strictly with the Kubernetes (and prometheus-operator) API types,
// and check the DaemonSet against deploy/kubernetes/galago.yaml, whose pod
// the end-to-end tier runs under a real containerd. It is a module of its
// own so that helm's dependencies stay out of galago's go.mod; `make unit`
// runs it.
package helm

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "galago"

// rendered is what one rendering of the chart produced, decoded.
type rendered struct {
	daemonSet      *appsv1.DaemonSet
	configMap      *corev1.ConfigMap
	service        *corev1.Service
	serviceMonitor *monitoringv1.ServiceMonitor
}

func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	opts := chartutil.ReleaseOptions{Name: "galago", Namespace: "monitoring", Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var r rendered
	for name, body := range files {
		if strings.HasSuffix(name, ".tpl") || strings.TrimSpace(body) == "" {
			continue
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(body), &meta); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, body)
		}
		var obj any
		switch meta.Kind {
		case "DaemonSet":
			r.daemonSet = &appsv1.DaemonSet{}
			obj = r.daemonSet
		case "ConfigMap":
			r.configMap = &corev1.ConfigMap{}
			obj = r.configMap
		case "Service":
			r.service = &corev1.Service{}
			obj = r.service
		case "ServiceMonitor":
			r.serviceMonitor = &monitoringv1.ServiceMonitor{}
			obj = r.serviceMonitor
		default:
			t.Fatalf("%s: unexpected kind %q", name, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(body), obj); err != nil {
			t.Fatalf("%s (%s) does not decode strictly: %v\n%s", name, meta.Kind, err, body)
		}
	}
	if r.daemonSet == nil || r.configMap == nil || r.service == nil {
		t.Fatalf("rendered %d files without a DaemonSet, ConfigMap and Service", len(files))
	}
	return r
}

// TestChartLints: `helm lint --strict` finds nothing above information
// (it recommends an icon, which galago does not have).
func TestChartLints(t *testing.T) {
	lint := action.NewLint()
	lint.Strict = true
	res := lint.Run([]string{chartDir}, map[string]any{})
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		} else {
			t.Logf("helm lint: %s", m)
		}
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
}

// TestChartRendersWhatTheManifestRuns: the chart's pod is the manifest's
// (the one test/e2e runs under containerd): same namespaces, volumes,
// mounts, capabilities and environment variable names.
func TestChartRendersWhatTheManifestRuns(t *testing.T) {
	r := render(t, nil)
	b, err := os.ReadFile("../kubernetes/galago.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want *appsv1.DaemonSet
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal(doc, &ds); err == nil && ds.Kind == "DaemonSet" {
			want = &ds
		}
	}
	if want == nil {
		t.Fatal("no DaemonSet in deploy/kubernetes/galago.yaml")
	}
	got, exp := r.daemonSet.Spec.Template.Spec, want.Spec.Template.Spec
	if got.HostPID != exp.HostPID || got.HostNetwork != exp.HostNetwork {
		t.Errorf("hostPID/hostNetwork %v/%v, manifest %v/%v", got.HostPID, got.HostNetwork, exp.HostPID, exp.HostNetwork)
	}
	if !reflect.DeepEqual(got.Volumes, exp.Volumes) {
		t.Errorf("volumes differ from the manifest's:\n%+v\n%+v", got.Volumes, exp.Volumes)
	}
	gc, ec := got.Containers[0], exp.Containers[0]
	if !reflect.DeepEqual(gc.VolumeMounts, ec.VolumeMounts) {
		t.Errorf("volume mounts differ from the manifest's:\n%+v\n%+v", gc.VolumeMounts, ec.VolumeMounts)
	}
	if !reflect.DeepEqual(gc.SecurityContext.Capabilities, ec.SecurityContext.Capabilities) {
		t.Errorf("capabilities %+v, manifest %+v", gc.SecurityContext.Capabilities, ec.SecurityContext.Capabilities)
	}
	names := func(env []corev1.EnvVar) []string {
		var out []string
		for _, e := range env {
			out = append(out, e.Name)
		}
		return out
	}
	if !slices.Equal(names(gc.Env), names(ec.Env)) {
		t.Errorf("env %v, manifest %v", names(gc.Env), names(ec.Env))
	}
	if r.serviceMonitor != nil {
		t.Error("a ServiceMonitor rendered while serviceMonitor.enabled is false")
	}
	if !strings.Contains(r.configMap.Data["probes.init"], "baseinfo ") {
		t.Errorf("probes.init ConfigMap: %q", r.configMap.Data["probes.init"])
	}
}

// TestChartValues: GOPHER_* values become the container's environment,
// probes.init the ConfigMap's, and serviceMonitor.enabled renders a
// ServiceMonitor for the metrics port.
func TestChartValues(t *testing.T) {
	r := render(t, map[string]any{
		"gopher":         map[string]any{"GOPHER_EVENT_CHANNEL": "kafka", "GOPHER_KAFKA_SERVER": "kafka.monitoring:9092"},
		"probesInit":     "tcp {\"state\":\"running\"}\n",
		"serviceMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prom"}},
		"image":          map[string]any{"repository": "registry.example/galago", "tag": "1.2.3"},
	})
	env := map[string]string{}
	for _, e := range r.daemonSet.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["GOPHER_EVENT_CHANNEL"] != "kafka" || env["GOPHER_KAFKA_SERVER"] != "kafka.monitoring:9092" {
		t.Errorf("GOPHER_* values not in the environment: %v", env)
	}
	if got := r.daemonSet.Spec.Template.Spec.Containers[0].Image; got != "registry.example/galago:1.2.3" {
		t.Errorf("image %q", got)
	}
	if got := r.configMap.Data["probes.init"]; got != "tcp {\"state\":\"running\"}\n" {
		t.Errorf("probes.init %q", got)
	}
	sm := r.serviceMonitor
	if sm == nil {
		t.Fatal("no ServiceMonitor with serviceMonitor.enabled")
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || string(sm.Spec.Endpoints[0].Interval) != "15s" || sm.Labels["release"] != "prom" {
		t.Errorf("ServiceMonitor %+v", sm)
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if r.service.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, the Service's labels are %v", k, v, r.service.Labels)
		}
	}
}
