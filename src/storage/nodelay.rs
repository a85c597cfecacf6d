//! `TCP_NODELAY` on the PostgreSQL connections. sqlx opens its TCP sockets without it and has no
//! option for it, so Nagle's algorithm holds back the last, partial segment of a statement
//! larger than one segment (an upload chunk's 1,000 rows bound as arrays is about 60 kB) until
//! the database acknowledges the ones before. Every statement pays that wait, which the database
//! itself spends idle.
//!
//! After a connection opens, every TCP socket of this process connected to the database's port
//! gets `TCP_NODELAY` (a socket already set is set again, which changes nothing). The process's
//! open sockets are found in `/proc/self/fd`; elsewhere this does nothing.

/// Sets `TCP_NODELAY` on the process's TCP sockets whose peer listens on `port`.
#[cfg(target_os = "linux")]
pub fn apply(port: u16) {
    use std::os::fd::BorrowedFd;
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        // SAFETY: the descriptor is borrowed for these calls only and never closed here. One
        // closed (and its number reused) meanwhile is at worst another socket of this process,
        // which the checks below pass over unless it is a TCP connection to the same port.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&fd);
        let to_port = socket
            .peer_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .is_some_and(|a| a.port() == port);
        let stream = socket.r#type().is_ok_and(|t| t == socket2::Type::STREAM);
        if to_port && stream {
            let _ = socket.set_tcp_nodelay(true);
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn apply(_port: u16) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::apply;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn sockets_to_the_port_get_nodelay_and_others_do_not() {
        let db = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let to_db = TcpStream::connect(db.local_addr().unwrap()).unwrap();
        let to_other = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!to_db.nodelay().unwrap());
        apply(db.local_addr().unwrap().port());
        assert!(to_db.nodelay().unwrap());
        assert!(!to_other.nodelay().unwrap());
    }
}
