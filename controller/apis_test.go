package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// scriptedDiscovery answers for the Gateway API's group what the test says: "served", "absent" (404) or "error"
// (the server unavailable).
type scriptedDiscovery struct {
	*fakediscovery.FakeDiscovery
	answer string
}

func (d *scriptedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	switch {
	case d.answer == "error":
		return nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	case d.answer == "served" && gv == gatewayGroup+"/v1":
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{
			{Name: "httproutes", Kind: "HTTPRoute"}, {Name: "httproutes/status", Kind: "HTTPRoute"}}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
}

// TestServedAPIsFollowDiscoveryBothWays: a kind is watched when discovery lists it and unwatched when it stops
// (only on a 404: an unavailable server changes nothing); a write refused because the CRD terminates, or answered
// 404 while discovery still lists the kind, counts the kind unserved at once, with no watch change until discovery
// no longer lists it, and for goingFor at most.
func TestServedAPIsFollowDiscoveryBothWays(t *testing.T) {
	route := *childKindOf("HTTPRoute")
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: gatewayGroup, Resource: "httproutes"}, "web",
		errors.New("create not allowed while custom resource definition is terminating"))
	notFound := apierrors.NewGenericServerResponse(404, "patch", schema.GroupResource{Group: gatewayGroup, Resource: "httproutes"}, "web", "", 0, true)
	type step struct {
		answer  string // discovery's answer from this step on
		do      string // "check", "write-terminating", "write-404", "write-denied", "expire"
		served  bool   // isServed after the step
		watches string // what the watch hooks were called with, in this step ("+": onServed, "-": onGone)
		changed int    // calls of changed in this step
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"installed later, then uninstalled", []step{
			{answer: "absent", do: "check", served: false},
			{answer: "served", do: "check", served: true, watches: "+", changed: 1},
			{answer: "served", do: "check", served: true},
			{answer: "absent", do: "check", served: false, watches: "-", changed: 1},
			{answer: "absent", do: "check", served: false},
		}},
		{"an unavailable server uninstalls nothing", []step{
			{answer: "served", do: "check", served: true, watches: "+", changed: 1},
			{answer: "error", do: "check", served: true},
		}},
		{"a write that finds no API while discovery still lists it is believed, for goingFor at most", []step{
			{answer: "served", do: "check", served: true, watches: "+", changed: 1},
			{answer: "served", do: "write-404", served: false, changed: 1},
			{answer: "served", do: "write-404", served: false},
			{answer: "served", do: "expire", served: true, changed: 1},
			{answer: "served", do: "write-404", served: false, changed: 1},
			{answer: "absent", do: "check", served: false, watches: "-"},
		}},
		{"a write that finds the API gone asks discovery at once", []step{
			{answer: "served", do: "check", served: true, watches: "+", changed: 1},
			{answer: "absent", do: "write-404", served: false, watches: "-", changed: 1},
		}},
		{"a denied write is no sign of a missing API", []step{
			{answer: "served", do: "check", served: true, watches: "+", changed: 1},
			{answer: "absent", do: "write-denied", served: true},
		}},
		{"a terminating CRD is unserved at once and unwatched once gone", []step{
			{answer: "served", do: "check", served: true, watches: "+", changed: 1},
			{answer: "served", do: "write-terminating", served: false, changed: 1},
			{answer: "served", do: "write-terminating", served: false},
			{answer: "served", do: "check", served: false},
			{answer: "absent", do: "check", served: false, watches: "-"},
			{answer: "served", do: "check", served: true, watches: "+", changed: 1},
		}},
		{"a CRD created again before a check saw it gone is served after goingFor", []step{
			{answer: "served", do: "check", served: true, watches: "+", changed: 1},
			{answer: "served", do: "write-terminating", served: false, changed: 1},
			{answer: "served", do: "expire", served: true, changed: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			disc := &scriptedDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}}
			var watches string
			changed := 0
			s := &servedAPIs{disc: disc, served: map[string]bool{}, kick: make(chan struct{}, 1),
				onServed: func(context.Context, childKind) error { watches += "+"; return nil },
				onGone:   func(context.Context, childKind) error { watches += "-"; return nil },
				changed:  func(context.Context) { changed++ }}
			for i, st := range tc.steps {
				disc.answer, watches, changed = st.answer, "", 0
				s.lastCheck = time.Time{} // every write's recheck may ask discovery
				switch st.do {
				case "check":
					s.check(ctx)
				case "write-terminating":
					if !s.recheck(ctx, route, fmt.Errorf("applying: %w", terminating)) {
						t.Errorf("step %d: a write refused for a terminating CRD is not counted unserved", i)
					}
				case "write-404":
					s.recheck(ctx, route, fmt.Errorf("applying: %w", notFound))
				case "write-denied":
					if s.recheck(ctx, route, apierrors.NewForbidden(schema.GroupResource{Group: gatewayGroup, Resource: "httproutes"}, "web", errors.New("denied by policy"))) {
						t.Errorf("step %d: a denied write counted as a missing API", i)
					}
				case "expire":
					s.going[route.kind] = time.Now().Add(-goingFor)
					s.check(ctx)
				}
				if got := s.isServed(route); got != st.served || watches != st.watches || changed != st.changed {
					t.Errorf("step %d (%s, discovery %s): served %v, watches %q, changed %d; want %v, %q, %d",
						i, st.do, st.answer, got, watches, changed, st.served, st.watches, st.changed)
				}
			}
		})
	}
}

func TestMissingAPI(t *testing.T) {
	gr := schema.GroupResource{Group: gatewayGroup, Resource: "httproutes"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewGenericServerResponse(404, "patch", gr, "web", "", 0, true), true},
		{&meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: gatewayGroup, Kind: "HTTPRoute"}, SearchedVersions: []string{"v1"}}, true},
		{apierrors.NewForbidden(gr, "web", errors.New("exceeded quota")), false},
		{apierrors.NewInvalid(schema.GroupKind{Group: gatewayGroup, Kind: "HTTPRoute"}, "web", nil), false},
		{apierrors.NewServiceUnavailable("unavailable"), false},
	} {
		if got := missingAPI(fmt.Errorf("wrapped: %w", tc.err)); got != tc.want {
			t.Errorf("missingAPI(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
