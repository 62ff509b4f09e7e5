package controller

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// behind says whether the cache may not yet show our own last write of an object: ensure then reads the server, so
// it must be true only while the cache lags, never for good.
func TestBehindOnlyWhileTheCacheLagsOurWrite(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	obj := func(uid, rv string) client.Object {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: types.UID(uid), ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name   string
		record func(m *memory)
		cached client.Object
		want   bool
	}{
		{"nothing written", func(*memory) {}, obj("a", "5"), false},
		{"the cache shows our write", func(m *memory) { m.remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("a", "10"), false},
		{"the cache is past our write", func(m *memory) { m.remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("a", "12"), false},
		{"the cache is before our write", func(m *memory) { m.remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("a", "5"), true},
		{"a replacement made after our write", func(m *memory) { m.remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("b", "12"), false},
		{"an older object than the one we wrote", func(m *memory) { m.remember("Service", key, obj("a", "10"), [32]byte{}) }, obj("b", "5"), true},
		{"a refused create (nothing written)", func(m *memory) { m.refused("Service", key, nil, [32]byte{}, errors.New("refused")) }, obj("b", "5"), false},
		{"a refused apply of the object the cache shows", func(m *memory) { m.refused("Service", key, obj("a", "7"), [32]byte{}, errors.New("refused")) }, obj("a", "7"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m memory
			tc.record(&m)
			if got := m.behind("Service", key, tc.cached); got != tc.want {
				t.Errorf("behind = %v, want %v", got, tc.want)
			}
		})
	}
}
