//! PostgreSQL connections without Nagle's algorithm. sqlx 0.9.0 opens its TCP sockets with it
//! on (its issue transact-rs/sqlx#4335; the fix is merged but not released), so the last part
//! of a message larger than a segment (a statement's array parameters, a copy's rows, the end
//! of a copy) waits for the database to acknowledge what came before, which it delays by up to
//! 40 ms. sqlx does not hand out its sockets, so after each new connection every TCP socket of
//! the process whose peer is the database's port is found in `/proc/self/fd` and given
//! `TCP_NODELAY`: setting it again on a socket that has it, or on another socket to that port,
//! changes nothing but the delay.

/// Sets `TCP_NODELAY` on every TCP socket of the process connected to `port`; nothing where
/// there is no `/proc` (the sockets keep sqlx's setting there).
#[cfg(target_os = "linux")]
pub fn to_port(port: u16) {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for entry in fds.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let socket = std::fs::read_link(entry.path())
            .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"));
        if socket && peer_port(fd) == Some(port) {
            let on: libc::c_int = 1;
            // SAFETY: `fd` is an open socket of this process (read from /proc/self/fd just
            // now; if it was closed since, the call fails and changes nothing), and `on` is a
            // c_int that lives through the call, as TCP_NODELAY's value must be.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    (&raw const on).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn to_port(_port: u16) {}

/// The port of the TCP peer of socket `fd`, if it has one.
#[cfg(target_os = "linux")]
fn peer_port(fd: i32) -> Option<u16> {
    // SAFETY: an all-zero sockaddr_storage is a valid value of the type.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `addr` and `len` are valid for writes and `len` holds `addr`'s size, as
    // getpeername requires; a descriptor that is not a connected socket makes it fail.
    let got = unsafe { libc::getpeername(fd, (&raw mut addr).cast(), &raw mut len) };
    if got != 0 {
        return None;
    }
    match i32::from(addr.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which fits in it.
            let v4 = unsafe { &*(&raw const addr).cast::<libc::sockaddr_in>() };
            Some(u16::from_be(v4.sin_port))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6, which fits in it.
            let v6 = unsafe { &*(&raw const addr).cast::<libc::sockaddr_in6>() };
            Some(u16::from_be(v6.sin6_port))
        }
        _ => None,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn nodelay(fd: i32) -> bool {
        let mut on: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `on` and `len` are valid for writes, `len` holds `on`'s size.
        let got = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&raw mut on).cast(),
                &raw mut len,
            )
        };
        assert_eq!(got, 0);
        on != 0
    }

    #[test]
    fn only_the_sockets_to_the_port_lose_the_delay() {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to_a = std::net::TcpStream::connect(a.local_addr().unwrap()).unwrap();
        let to_b = std::net::TcpStream::connect(b.local_addr().unwrap()).unwrap();
        assert!(!nodelay(to_a.as_raw_fd()) && !nodelay(to_b.as_raw_fd()));
        assert_eq!(
            peer_port(to_a.as_raw_fd()),
            Some(a.local_addr().unwrap().port())
        );
        to_port(a.local_addr().unwrap().port());
        assert!(nodelay(to_a.as_raw_fd()));
        assert!(!nodelay(to_b.as_raw_fd()));
    }
}
