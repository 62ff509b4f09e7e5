package controller

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/pods"
)

func TestSplitPods(t *testing.T) {
	app := apptest.NewApp("shop", 3, 8080, "shop:1")
	pod := func(name string, labels map[string]string) *pods.Pod {
		return &pods.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	podList := []*pods.Pod{
		pod("s1", map[string]string{webappv2.LabelInstance: "shop"}),
		pod("c1", map[string]string{webappv2.LabelInstance: "shop", webappv2.LabelCanaryOf: "shop"}),
		pod("c2", map[string]string{webappv2.LabelCanaryOf: "shop"}),
		pod("s2", map[string]string{webappv2.LabelInstance: "shop", webappv2.LabelCanaryOf: "other"}),
	}
	stable, canary := splitPods(app, podList)
	names := func(ps []*pods.Pod) (out []string) {
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(stable); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Errorf("stable %v", got)
	}
	if got := names(canary); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("canary %v", got)
	}
}

func TestCanaryReplaced(t *testing.T) {
	dep := func(rev string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		if rev != "" {
			d.Annotations = map[string]string{webappv2.AnnotationRevision: rev}
		}
		return d
	}
	want := func(rev string) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("web-canary", "ns").WithAnnotations(map[string]string{webappv2.AnnotationRevision: rev})
	}
	for _, c := range []struct {
		name string
		cur  *appsv1.Deployment
		want *appsv1ac.DeploymentApplyConfiguration
		is   bool
	}{
		{name: "the same version: applied", cur: dep("b"), want: want("b")},
		{name: "another version: replaced", cur: dep("b"), want: want("c"), is: true},
		{name: "no revision on it (not written by a canary): applied", cur: dep(""), want: want("c")},
		{name: "none wanted: not a replacement", cur: dep("b"), want: nil},
	} {
		if got := canaryReplaced(c.cur, c.want); got != c.is {
			t.Errorf("%s: canaryReplaced = %v, want %v", c.name, got, c.is)
		}
	}
}
