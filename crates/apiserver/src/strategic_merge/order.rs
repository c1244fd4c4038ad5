//! Element order of merged lists: the patch's order first, the live list's order for the rest.
//!
//! Mirrors upstream's `normalizeElementOrder`, `normalizeSliceOrder`, `mergeSortedSlice`
//! and `deduplicateScalars`, including the sort they use: Go's `sort.SliceStable` with a
//! comparator that is not a strict weak order (an element missing from the order list is
//! "less" than anything), whose results depend on the exact algorithm — so that algorithm
//! (insertion sort in blocks of 20, then `symMerge`) is reproduced in [`go_stable_sort`].

use serde_json::Value;

use super::directives::{DELETE_DIRECTIVE, DIRECTIVE_MARKER};
use super::error::{Error, FieldPath, Result, json_type_name};

static NULL: Value = Value::Null;

/// The identity of a list element for ordering: its merge-key value for a list of maps
/// (null when it has none, as Go's map lookup returns nil), the element itself otherwise.
pub(super) fn identity<'a>(item: &'a Value, merge_key: &str, is_map: bool) -> &'a Value {
    if !is_map {
        return item;
    }
    item.as_object()
        .and_then(|m| m.get(merge_key))
        .unwrap_or(&NULL)
}

/// The identities of `list`, checking first (for lists of maps) that every element is a map
/// holding the merge key — upstream's `validateMergeKeyInLists`.
pub(super) fn identities(
    list: &[Value],
    merge_key: &'static str,
    is_map: bool,
) -> Result<Vec<Value>> {
    if is_map {
        check_maps_with_key(list, merge_key)?;
    }
    Ok(list
        .iter()
        .map(|v| identity(v, merge_key, is_map).clone())
        .collect())
}

/// The position of `item` in `order` (a list of identities), as upstream's `index`.
fn position(order: &[Value], item: &Value, merge_key: &str, is_map: bool) -> Option<usize> {
    let id = identity(item, merge_key, is_map);
    order.iter().position(|o| o == id)
}

/// Sorts `patch_items` by `patch_order` and `server_only` by `server_order` (both lists of
/// identities), then interleaves them: upstream's `normalizeElementOrder`.
pub(super) fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &'static str,
    is_map: bool,
) -> Result<Vec<Value>> {
    let patch_items = normalize_slice_order(patch_items, patch_order, merge_key, is_map)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, is_map)?;
    Ok(merge_sorted_slice(
        server_only,
        patch_items,
        server_order,
        merge_key,
        is_map,
    ))
}

/// Sorts `to_sort` by the positions of its elements in `order`, elements marked
/// `$patch: delete` last: upstream's `normalizeSliceOrder`.
fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &'static str,
    is_map: bool,
) -> Result<Vec<Value>> {
    let (to_sort, to_delete) = if is_map {
        check_maps_with_key(&to_sort, merge_key)?;
        split_deletions(to_sort)?
    } else {
        (to_sort, Vec::new())
    };
    let mut keyed: Vec<(Option<usize>, Value)> = to_sort
        .into_iter()
        .map(|v| (position(order, &v, merge_key, is_map), v))
        .collect();
    go_stable_sort(&mut keyed, |a, b| match (a.0, b.0) {
        (Some(x), Some(y)) => x < y,
        _ => true,
    });
    let mut sorted: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
    sorted.extend(to_delete);
    Ok(sorted)
}

/// Every element of `list` is a map holding `merge_key`.
pub(super) fn check_maps_with_key(list: &[Value], merge_key: &'static str) -> Result<()> {
    for item in list {
        let Some(map) = item.as_object() else {
            return Err(Error::BadArgType {
                path: FieldPath::default(),
                expected: "map",
                actual: json_type_name(item),
            });
        };
        if !map.contains_key(merge_key) {
            return Err(Error::NoMergeKey {
                path: FieldPath::default(),
                map: item.to_string(),
                key: merge_key,
            });
        }
    }
    Ok(())
}

/// Splits a list of maps into the elements to keep and those marked `$patch: delete`:
/// upstream's `extractToDeleteItems`.
pub(super) fn split_deletions(list: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut keep = Vec::with_capacity(list.len());
    let mut delete = Vec::new();
    for item in list {
        let Some(map) = item.as_object() else {
            return Err(Error::BadArgType {
                path: FieldPath::default(),
                expected: "map",
                actual: json_type_name(&item),
            });
        };
        if map.get(DIRECTIVE_MARKER).and_then(Value::as_str) == Some(DELETE_DIRECTIVE) {
            delete.push(item);
        } else {
            keep.push(item);
        }
    }
    Ok((keep, delete))
}

/// Interleaves two sorted lists, keeping each list's relative order; an element of `left`
/// goes before the next element of `right` only when both are in `server_order` and it
/// comes first there: upstream's `mergeSortedSlice`.
fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    is_map: bool,
) -> Vec<Value> {
    let rank = |v: &Value| position(server_order, v, merge_key, is_map);
    let left_ranks: Vec<Option<usize>> = left.iter().map(rank).collect();
    let right_ranks: Vec<Option<usize>> = right.iter().map(rank).collect();
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().zip(left_ranks).peekable();
    let mut right = right.into_iter().zip(right_ranks).peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some((_, Some(l))), Some((_, Some(r)))) => l < r,
            (Some(_), Some(_)) => false,
            _ => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some((v, _)) = next {
            out.push(v);
        }
    }
    out.extend(left.map(|(v, _)| v));
    out.extend(right.map(|(v, _)| v));
    out
}

/// Removes duplicates the way upstream's `deduplicateScalars` does: a duplicate is
/// overwritten by the current last element, so the survivors' order can change.
pub(super) fn dedupe_scalars(mut s: Vec<Value>) -> Vec<Value> {
    let mut length = s.len() as isize - 1;
    let mut i: isize = 0;
    while i < length {
        let mut j = i + 1;
        while j <= length {
            if s[i as usize] == s[j as usize] {
                s.swap(j as usize, length as usize);
                s.truncate(length as usize);
                length -= 1;
                j -= 1;
            }
            j += 1;
        }
        i += 1;
    }
    s
}

/// Go's `sort.SliceStable`: insertion sort on blocks of 20, then repeated `symMerge` of
/// neighbouring blocks. Reproduced exactly because upstream's comparator is not a strict
/// weak order, so another stable sort could order some lists differently.
pub(super) fn go_stable_sort<T>(data: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(data, a, b, &mut less);
        a = b;
        b += block;
    }
    insertion_sort(data, a, n, &mut less);
    while block < n {
        let (mut a, mut b) = (0, 2 * block);
        while b <= n {
            sym_merge(data, a, a + block, b, &mut less);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            sym_merge(data, a, m, n, &mut less);
        }
        block *= 2;
    }
}

fn insertion_sort<T>(data: &mut [T], a: usize, b: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(&data[j], &data[j - 1]) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

/// Merges the sorted `data[a..m]` and `data[m..b]` in place (Go's `symMerge`).
fn sym_merge<T>(
    data: &mut [T],
    a: usize,
    m: usize,
    b: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) {
    if m - a == 1 {
        // Binary search for the first element of data[m..b] not less than data[a], then
        // rotate data[a] into place.
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(&data[h], &data[a]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i - 1 {
            data.swap(k, k + 1);
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(&data[m], &data[h]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(&data[p - c], &data[c]) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(data, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b, less);
    }
}

/// Rotates `data[a..b]` so `data[m]` comes first, with Go's swap sequence.
fn rotate<T>(data: &mut [T], a: usize, m: usize, b: usize) {
    let mut i = m - a;
    let mut j = b - m;
    while i != j {
        if i > j {
            swap_range(data, m - i, m, j);
            i -= j;
        } else {
            swap_range(data, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(data, m - i, m, i);
}

fn swap_range<T>(data: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        data.swap(a + i, b + i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ints(v: &[i64]) -> Vec<Value> {
        v.iter().map(|i| json!(i)).collect()
    }

    #[test]
    fn stable_sort_sorts_large_inputs_stably() {
        // 100 elements with many equal keys: exercises both insertion sort and symMerge.
        let mut data: Vec<(u32, usize)> = (0..100).map(|i| ((i * 37 % 11) as u32, i)).collect();
        go_stable_sort(&mut data, |a, b| a.0 < b.0);
        for w in data.windows(2) {
            assert!(
                w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1),
                "{w:?}"
            );
        }
    }

    #[test]
    fn always_less_comparator_reverses_like_go() {
        // Elements missing from the order list compare "less" than anything; Go's insertion
        // sort then moves each new element to the front.
        let mut data = vec![1, 2, 3, 4];
        go_stable_sort(&mut data, |_, _| true);
        assert_eq!(data, vec![4, 3, 2, 1]);
    }

    #[test]
    fn dedupe_moves_last_element_into_the_hole() {
        struct Case {
            name: &'static str,
            input: Vec<Value>,
            want: Vec<Value>,
        }
        let cases = [
            Case {
                name: "no duplicates",
                input: ints(&[1, 2, 3]),
                want: ints(&[1, 2, 3]),
            },
            Case {
                name: "duplicate replaced by the last element",
                input: ints(&[1, 1, 2, 3]),
                want: ints(&[1, 3, 2]),
            },
            Case {
                name: "empty",
                input: vec![],
                want: vec![],
            },
            Case {
                name: "all equal",
                input: ints(&[5, 5, 5]),
                want: ints(&[5]),
            },
        ];
        for case in cases {
            assert_eq!(dedupe_scalars(case.input), case.want, "{}", case.name);
        }
    }

    #[test]
    fn server_only_items_keep_their_place_among_patch_items() {
        // Live [1, 2, 3], patch ordered [3, 1]: 2 is server-only and stays before 3.
        let merged = normalize_element_order(
            ints(&[1, 3]),
            ints(&[2]),
            &ints(&[3, 1]),
            &ints(&[1, 2, 3]),
            "",
            false,
        )
        .expect("normalize");
        assert_eq!(merged, ints(&[2, 3, 1]));
    }
}
