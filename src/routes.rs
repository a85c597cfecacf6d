//! The route table: every path the server answers, as data. The router, the `Allow` lists of a
//! 405, the entity names the routes reserve and the walk test against the OpenAPI document are
//! all built from it. Every route also exists under [`PREFIX`], except where a route says not.

/// The prefix every route (but [`Route::unprefixed_only`] ones) also answers under.
pub const PREFIX: &str = "/v2.5";

/// One path and the methods it answers.
pub struct Route {
    /// The path as the router writes it: `:name` is one segment.
    pub path: &'static str,
    pub methods: &'static [&'static str],
    /// Answered only without [`PREFIX`].
    pub unprefixed_only: bool,
    /// What answers it: a handler of the fixed API, or the entities' CRUD and batch routes.
    pub owner: Owner,
}

/// Who answers a route.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Owner {
    /// A fixed route; its first segment is reserved, so no entity can take its name.
    Fixed,
    /// A fixed route under an entity's path (`/users/me`): the entity keeps its name.
    FixedUnderEntity,
    /// Every entity's collection and item routes.
    Entity,
}

const fn fixed(path: &'static str, methods: &'static [&'static str]) -> Route {
    Route {
        path,
        methods,
        unprefixed_only: false,
        owner: Owner::Fixed,
    }
}

const GET: &[&str] = &["GET"];

/// Every route. Static segments win over `:name` ones, so `/bgrs/:rid` is never an entity's
/// item route.
pub const ROUTES: &[Route] = &[
    Route {
        unprefixed_only: true,
        ..fixed("/", GET)
    },
    Route {
        unprefixed_only: true,
        ..fixed(HEALTH, GET)
    },
    Route {
        unprefixed_only: true,
        ..fixed("/readyz", GET)
    },
    Route {
        unprefixed_only: true,
        ..fixed("/metrics", GET)
    },
    fixed("/openapi.json", GET),
    fixed("/docs", GET),
    fixed("/docs/assets/:name", GET),
    fixed("/auth/token", &["POST", "DELETE"]),
    Route {
        owner: Owner::FixedUnderEntity,
        ..fixed("/users/me", GET)
    },
    fixed("/bgrs", GET),
    fixed("/bgrs/:rid", &["GET", "DELETE"]),
    fixed("/bgrs/:rid/details", GET),
    fixed("/bgrs/:rid/result", GET),
    fixed("/bgrs/:rid/events", GET),
    fixed("/bgrs/:rid/undo", &["GET", "POST"]),
    fixed("/bgrs/:rid/failed", GET),
    fixed("/media/keep1m/:file", GET),
    fixed(FILES_ROUTE, GET),
    fixed("/tools/uploader.ex.php", &["POST"]),
    fixed("/tools/uploader", GET),
    fixed("/tools/requests", GET),
    fixed("/tools/data", GET),
    fixed("/tools/assets/:name", GET),
    fixed("/tools/entities", GET),
    Route {
        owner: Owner::Entity,
        ..fixed("/:entity", &["GET", "POST", "PUT", "DELETE"])
    },
    Route {
        owner: Owner::Entity,
        ..fixed("/:entity/events", GET)
    },
    Route {
        owner: Owner::Entity,
        ..fixed("/:entity/changes", GET)
    },
    Route {
        owner: Owner::Entity,
        ..fixed(ITEM, &["GET", "PUT", "DELETE"])
    },
];

/// The liveness route.
pub const HEALTH: &str = "/healthz";

/// Every entity's item route: one object by id.
pub const ITEM: &str = "/:entity/:id";

/// The entity and id segments of `path`, with or without [`PREFIX`], when it is exactly two
/// plain segments: no percent escape, no empty segment, no trailing slash. Such a path is one
/// the router would match to [`ITEM`] and hand over as these two texts unchanged; any other
/// (`/a%2Fb/1`, `/a/1/`) is `None` and left to the router.
pub fn plain_item(path: &str) -> Option<(&str, &str)> {
    let rest = without_prefix(path).unwrap_or(path);
    let (entity, id) = rest.strip_prefix('/')?.split_once('/')?;
    let plain = |s: &str| !s.is_empty() && !s.as_bytes().iter().any(|&c| c == b'/' || c == b'%');
    (plain(entity) && plain(id)).then_some((entity, id))
}

/// Stored files: the key is one parameter that may hold slashes (`<entity>/<bundle>/...`).
/// The router sees it with its slashes escaped ([`one_segment_key`]).
pub const FILES_ROUTE: &str = "/media/files/:key";

/// Escapes the slashes of a stored file's key, so that `/media/files/a/b/c.pdf` reaches
/// [`FILES_ROUTE`] with the key `a/b/c.pdf`; other paths are returned as they are.
pub fn one_segment_key(path: &str) -> Option<String> {
    let unprefixed = path.strip_prefix(PREFIX).unwrap_or(path);
    let key = unprefixed.strip_prefix("/media/files/")?;
    if !key.contains('/') {
        return None;
    }
    let head = &path[..path.len() - key.len()];
    Some(format!("{head}{}", key.replace('/', "%2F")))
}

/// The routes answered under `prefix` (`""` or [`PREFIX`]).
pub fn under(prefix: &str) -> impl Iterator<Item = &'static Route> {
    let prefixed = !prefix.is_empty();
    ROUTES
        .iter()
        .filter(move |r| !(prefixed && r.unprefixed_only))
}

/// The segments of a path between its leading and trailing slashes (`/` has one, empty),
/// compared as bytes: a character search costs more than the comparison on paths this short.
fn segments(path: &str) -> impl Iterator<Item = &[u8]> {
    let b = path.as_bytes();
    let start = b.iter().position(|&c| c != b'/').unwrap_or(b.len());
    let end = b.iter().rposition(|&c| c != b'/').map_or(start, |i| i + 1);
    b[start..end].split(|&c| c == b'/')
}

/// `path` without [`PREFIX`], when it is under it.
fn without_prefix(path: &str) -> Option<&str> {
    path.strip_prefix(PREFIX)
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether `path` is under [`PREFIX`].
pub fn prefixed(path: &str) -> bool {
    without_prefix(path).is_some()
}

/// The route that answers `path`, static routes before the entities'. It runs for every
/// request (the metrics' route label), so it allocates nothing.
pub fn find(path: &str) -> Option<&'static Route> {
    let (prefixed, path) = match without_prefix(path) {
        Some(rest) => (true, rest),
        None => (false, path),
    };
    // The path's segments, split once; a path longer than every route fits none.
    let mut segs: [&[u8]; MAX_SEGMENTS] = [&[]; MAX_SEGMENTS];
    let mut n = 0;
    for seg in segments(path) {
        if n == MAX_SEGMENTS {
            return None;
        }
        segs[n] = seg;
        n += 1;
    }
    let segs = &segs[..n];
    let mut entity = None;
    for r in split_routes() {
        if (prefixed && r.route.unprefixed_only) || !r.fits(segs) {
            continue;
        }
        if r.route.owner != Owner::Entity {
            return Some(r.route);
        }
        entity = entity.or(Some(r.route));
    }
    entity
}

/// More segments than any route has.
const MAX_SEGMENTS: usize = 8;

/// A route with its pattern split into segments once.
struct Split {
    route: &'static Route,
    segs: Vec<&'static [u8]>,
}

impl Split {
    /// Whether a path of these segments fits the route.
    fn fits(&self, path: &[&[u8]]) -> bool {
        self.segs.len() == path.len()
            && self
                .segs
                .iter()
                .zip(path)
                .all(|(p, s)| p.first() == Some(&b':') || p == s)
    }
}

fn split_routes() -> &'static [Split] {
    static SPLIT: std::sync::OnceLock<Vec<Split>> = std::sync::OnceLock::new();
    SPLIT.get_or_init(|| {
        ROUTES
            .iter()
            .map(|route| Split {
                route,
                segs: segments(route.path).collect(),
            })
            .collect()
    })
}

/// The `Allow` header of a 405 at `path`.
pub fn allow(path: &str) -> String {
    allow_of(find(path))
}

/// The `Allow` header of a 405 at a path [`find`] gave `route` for.
pub fn allow_of(route: Option<&Route>) -> String {
    route.map_or_else(|| "GET".to_string(), |r| r.methods.join(", "))
}

/// Names no entity may take: the first segments of the fixed routes.
pub fn reserved_names() -> impl Iterator<Item = &'static str> {
    ROUTES
        .iter()
        .filter(|r| r.owner == Owner::Fixed)
        .filter_map(|r| r.path.trim_start_matches('/').split('/').next())
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_fewer_segments_than_a_path_may_have() {
        assert!(
            ROUTES
                .iter()
                .all(|r| segments(r.path).count() < MAX_SEGMENTS)
        );
        assert!(find("/a/b/c/d/e/f/g/h/i").is_none());
        assert_eq!(find("/").map(|r| r.path), Some("/"));
        assert_eq!(find("/v2.5/").map(|r| r.path), Some("/:entity"));
    }

    #[test]
    fn plain_items_are_two_unescaped_segments() {
        assert_eq!(plain_item("/campaigns/3"), Some(("campaigns", "3")));
        assert_eq!(plain_item("/v2.5/campaigns/x"), Some(("campaigns", "x")));
        for path in [
            "/campaigns",
            "/campaigns/",
            "/campaigns/3/",
            "/campaigns//3",
            "//3",
            "/cam%70aigns/3",
            "/campaigns/%33",
            "/campaigns/3/events",
            "/v2.5/campaigns",
        ] {
            assert_eq!(plain_item(path), None, "{path}");
        }
    }

    #[test]
    fn static_routes_win_and_the_rest_are_entities() {
        assert_eq!(allow("/auth/token"), "POST, DELETE");
        assert_eq!(allow("/v2.5/bgrs/abc"), "GET, DELETE");
        assert_eq!(allow("/campaigns"), "GET, POST, PUT, DELETE");
        assert_eq!(allow("/v2.5/campaigns/3"), "GET, PUT, DELETE");
        assert_eq!(allow("/users/me"), "GET");
        assert_eq!(find("/v2.5/healthz").map(|r| r.owner), Some(Owner::Entity));
    }

    #[test]
    fn file_keys_become_one_segment() {
        assert_eq!(
            one_segment_key("/v2.5/media/files/a/b c/d.pdf").as_deref(),
            Some("/v2.5/media/files/a%2Fb c%2Fd.pdf")
        );
        assert_eq!(one_segment_key("/media/files/a.pdf"), None);
        assert_eq!(one_segment_key("/bgrs/a/b"), None);
    }

    #[test]
    fn fixed_first_segments_are_reserved_but_users_is_an_entity() {
        let names: Vec<&str> = reserved_names().collect();
        for n in [
            "auth", "bgrs", "media", "tools", "healthz", "readyz", "metrics", "docs",
        ] {
            assert!(names.contains(&n), "{n}");
        }
        assert!(!names.contains(&"users"));
    }
}
