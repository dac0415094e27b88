package gitstore

import (
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
)

// TestRollup checks which packs a packing merges, with a threshold of 100:
// packs below 400 objects take part, a merge writes at most 600.
func TestRollup(t *testing.T) {
	const threshold = 100
	for _, tc := range []struct {
		name  string
		packs []int // objects per pack, fewest first
		loose int
		force bool
		want  int // how many of the smallest packs are merged
	}{
		{"first pack", nil, 101, false, 0},
		{"two of a size merge", []int{101}, 101, false, 1},
		{"a pack twice as big stays", []int{202}, 101, false, 0},
		{"the new pack breaks the progression up to the top", []int{101, 202}, 101, false, 2},
		{"a frozen pack stays", []int{404}, 101, false, 0},
		{"a frozen pack stays above a merge", []int{101, 404}, 101, false, 1},
		{"a broken progression below is merged", []int{101, 105, 1000}, 101, false, 2},
		{"what the new pack outgrows is merged, big packs stay", []int{101, 250, 2000, 9000}, 101, false, 2},
		// The layout the merge-everything-at-16-packs policy left behind:
		// one big pack and fifteen of a threshold's worth. Merges stay
		// within the bound and take a few packings to converge.
		{"many small packs: bounded", []int{101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 30000}, 101, false, 4},
		{"a merge never writes more than the bound", []int{350, 399}, 101, false, 1},
		{"forced: the smallest packs up to the bound", []int{101, 303, 505}, 101, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(old bool) { forceMerge = old }(forceMerge)
			forceMerge = tc.force
			var packs []pack
			for i, n := range tc.packs {
				packs = append(packs, pack{plumbing.NewHash(fmt.Sprintf("%040x", i+1)), n})
			}
			got := rollup(packs, tc.loose, threshold)
			if tc.want == 0 {
				assert.Empty(t, got)
			} else {
				assert.Equal(t, packs[:tc.want], got)
			}
			total := tc.loose
			for _, p := range got {
				total += p.objects
			}
			assert.LessOrEqual(t, total, maxMerge*threshold, "a merge writes at most maxMerge times the threshold")
		})
	}
}

// TestTidyUp checks which packs a pause merges, with a threshold of 100:
// the smallest packs not frozen, until two are left, the new one among
// them, within the bound on a merge.
func TestTidyUp(t *testing.T) {
	const threshold = 100
	for _, tc := range []struct {
		name   string
		packs  []int // objects per pack, fewest first
		loose  int
		merged int // how many of the smallest packs rollup chose
		want   int
	}{
		{"five packs: four merge", []int{3, 3, 4, 5, 6}, 0, 0, 4},
		{"loose objects make a pack too", []int{3, 3, 3, 3, 3}, 5, 0, 4},
		{"many flushes' packs", []int{3, 3, 3, 3, 3, 3, 3, 3, 3}, 0, 0, 8},
		{"frozen packs are not merged", []int{3, 3, 3, 3, 3, 400, 900}, 0, 0, 4},
		{"rollup's choice is grown", []int{3, 3, 3, 3, 3}, 0, 2, 4},
		{"rollup's choice that is enough stays", []int{3, 3, 3, 3, 3}, 0, 5, 5},
		{"never more than the bound", []int{250, 300, 350, 390, 399}, 0, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var packs []pack
			for i, n := range tc.packs {
				packs = append(packs, pack{plumbing.NewHash(fmt.Sprintf("%040x", i+1)), n})
			}
			got := tidyUp(packs, packs[:tc.merged], tc.loose, threshold)
			assert.Equal(t, packs[:tc.want], got)
			total := tc.loose
			for _, p := range got {
				total += p.objects
			}
			assert.LessOrEqual(t, total, maxMerge*threshold, "a merge writes at most maxMerge times the threshold")
		})
	}
}
