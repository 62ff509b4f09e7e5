package main

import (
	"slices"
	"testing"
)

func TestParseNamespaces(t *testing.T) {
	for _, tc := range []struct {
		flag    string
		want    []string
		wantErr bool
	}{
		{flag: "", want: nil},
		{flag: "team-a", want: []string{"team-a"}},
		{flag: "team-a, team-b,team-a", want: []string{"team-a", "team-b"}},
		{flag: "team-a,", wantErr: true},
		{flag: "Team_A", wantErr: true},
	} {
		got, err := parseNamespaces(tc.flag)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseNamespaces(%q) = %v, %v; want %v, error %v", tc.flag, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestMigrateStorageIsOffWithNamespaces(t *testing.T) {
	for _, tc := range []struct {
		namespaces  []string
		on, given   bool
		want, error bool
	}{
		{nil, true, false, true, false},
		{nil, false, true, false, false},
		{[]string{"a"}, true, false, false, false},
		{[]string{"a"}, false, true, false, false},
		{[]string{"a"}, true, true, false, true},
	} {
		got, err := migrateStorage(tc.namespaces, tc.on, tc.given)
		if got != tc.want || (err != nil) != tc.error {
			t.Errorf("migrateStorage(%v, %v, %v) = %v, %v", tc.namespaces, tc.on, tc.given, got, err)
		}
	}
}
