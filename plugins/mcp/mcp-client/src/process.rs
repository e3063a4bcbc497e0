//! A stdio server's processes: each server runs under a small supervising
//! process of its own, which holds the server's process group and ends it
//! when the host lets go.
//!
//! `spawn` starts the supervisor (the process the host sees), which puts
//! itself in a new session, makes itself a child subreaper, and forks the
//! server into a process group of its own. The host keeps the write end of
//! a pipe, the *lifeline*, whose read end only the supervisor holds. The
//! supervisor waits until the lifeline closes (the host stopped the
//! server, or the host ended, however it ended, SIGKILL included: the
//! kernel closes the descriptor) or until the server exits. Then it ends
//! the server's group: it waits [`EXIT_GRACE`] for the server to exit on
//! its own (its stdin is closed by then), sends SIGTERM to the group,
//! waits [`TERM_GRACE`], sends SIGKILL to the group, and SIGKILLs every
//! descendant still left (orphans are re-parented to it, the subreaper,
//! so a helper that left the group is found among its children), reaps
//! them all and exits.
//!
//! The supervisor runs only code that is safe between `fork` and `exec`
//! in a multi-threaded program (system calls, no allocation). Being in a
//! session of its own, the group receives no signal meant for the host's
//! terminal (a Ctrl-C reaches the host only). A server that starts a new
//! session or group for a helper takes that helper out of the group
//! signals; the helper is still a descendant, so the final sweep kills it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// How long the supervisor waits, once told to stop, for the server to exit
/// on its own (its stdin closed) before it sends SIGTERM to the group.
pub const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How long the group has after SIGTERM before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_millis(1000);

/// How long the last sweep (SIGKILL to every descendant left) may take.
const SWEEP_LIMIT: Duration = Duration::from_millis(2000);

/// How long `stop` waits for the supervisor to finish before it kills the
/// supervisor (whose server then receives its parent-death signal).
const STOP_LIMIT: Duration = Duration::from_millis(4000);

/// How often the supervisor looks at its lifeline and its children.
const TICK_MS: i32 = 20;

/// A started server: its supervisor, and the lifeline that keeps it
/// running.
#[derive(Debug)]
pub struct ServerProcess {
    supervisor: Child,
    lifeline: Option<OwnedFd>,
}

/// The pipes of a started server.
#[derive(Debug)]
pub struct Pipes {
    /// The server's stdin.
    pub stdin: ChildStdin,
    /// The server's stdout.
    pub stdout: ChildStdout,
    /// The server's stderr.
    pub stderr: ChildStderr,
}

impl ServerProcess {
    /// Starts `command` (program, arguments, environment and folder set)
    /// under a supervisor, with its stdin, stdout and stderr piped.
    ///
    /// # Errors
    /// When the lifeline cannot be made, or the program cannot be started
    /// (not found, not executable: the error of `exec`).
    pub fn spawn(mut command: Command) -> io::Result<(ServerProcess, Pipes)> {
        let (read, write) = lifeline()?;
        let read_fd = read.as_raw_fd();
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(false);
        // SAFETY: the closure runs in the child between fork and exec; it
        // only makes system calls that are async-signal-safe (see `split`).
        unsafe {
            command.pre_exec(move || split(read_fd));
        }
        let mut supervisor = command.spawn()?;
        drop(read);
        let (Some(stdin), Some(stdout), Some(stderr)) = (supervisor.stdin.take(), supervisor.stdout.take(), supervisor.stderr.take()) else {
            return Err(io::Error::other("the server's pipes were not set up"));
        };
        Ok((ServerProcess { supervisor, lifeline: Some(write) }, Pipes { stdin, stdout, stderr }))
    }

    /// The supervisor's process id (also its process group and session).
    pub fn id(&self) -> Option<u32> {
        self.supervisor.id()
    }

    /// Stops the server: closes the lifeline and waits for the supervisor,
    /// which ends the server's group as described above, to exit; kills
    /// the supervisor when it takes longer than its own limits allow.
    pub async fn stop(mut self) {
        drop(self.lifeline.take());
        if tokio::time::timeout(STOP_LIMIT, self.supervisor.wait()).await.is_err() {
            let _ = self.supervisor.start_kill();
            let _ = self.supervisor.wait().await;
        }
    }
}

/// A pipe whose both ends are closed on `exec`: the supervisor (which
/// never execs) keeps the read end, and no server inherits either end.
fn lifeline() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// In the child of `spawn`, between fork and exec: becomes the supervisor
/// in a new session and forks the server, which returns to exec.
///
/// # Safety
/// Only to be called between fork and exec. Makes only async-signal-safe
/// system calls and never returns in the supervisor.
unsafe fn split(lifeline: RawFd) -> io::Result<()> {
    // SAFETY: all calls below are plain system calls on values we own.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        let supervisor = libc::getpid();
        let server = libc::fork();
        if server < 0 {
            return Err(io::Error::last_os_error());
        }
        if server == 0 {
            // The server: a group of its own, and death with its supervisor.
            libc::setpgid(0, 0);
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != supervisor {
                libc::_exit(1);
            }
            return Ok(());
        }
        // Either this call or the server's own makes the group; the other
        // fails harmlessly.
        libc::setpgid(server, server);
        supervise(lifeline, server)
    }
}

/// The supervisor's whole life.
///
/// # Safety
/// As [`split`].
unsafe fn supervise(lifeline: RawFd, server: libc::pid_t) -> ! {
    // SAFETY: system calls only, on descriptors and pids this process owns.
    unsafe {
        // The host stops it through the lifeline, never by a signal of the
        // terminal or the session.
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE, libc::SIGTSTP] {
            libc::signal(signal, libc::SIG_IGN);
        }
        // Orphaned descendants come to this process, so none escapes the
        // final sweep.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        keep_only(lifeline);

        let mut server_running = true;
        loop {
            let mut watch = libc::pollfd { fd: lifeline, events: libc::POLLIN, revents: 0 };
            let ready = libc::poll(&mut watch, 1, TICK_MS);
            if reap(server) {
                server_running = false;
            }
            // POLLIN (a byte or end of file) or POLLHUP/POLLERR: the host
            // let go.
            if (ready > 0 && watch.revents != 0) || !server_running {
                break;
            }
        }
        if server_running {
            wait_for(EXIT_GRACE, || reap(server));
        }
        libc::kill(-server, libc::SIGTERM);
        wait_for(TERM_GRACE, || {
            reap(server);
            no_children()
        });
        libc::kill(-server, libc::SIGKILL);
        wait_for(SWEEP_LIMIT, || {
            sweep();
            reap(server);
            no_children()
        });
        libc::_exit(0)
    }
}

/// Points stdin, stdout and stderr at /dev/null and closes every other
/// descriptor but `lifeline` (the host's pipes and lifelines of other
/// servers included), so that only the server holds its pipes and only the
/// host holds the other end of the lifeline.
///
/// # Safety
/// As [`split`].
unsafe fn keep_only(lifeline: RawFd) {
    // SAFETY: system calls on descriptors of this process.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
        let ranges = [(3u32, (lifeline as u32).saturating_sub(1)), ((lifeline as u32).saturating_add(1), u32::MAX)];
        for (first, last) in ranges {
            if first > last {
                continue;
            }
            if libc::syscall(libc::SYS_close_range, first, last, 0u32) != 0 {
                // Kernels before 5.9: close one by one, up to the limit.
                let limit = libc::sysconf(libc::_SC_OPEN_MAX).clamp(0, 1 << 16) as u32;
                for fd in first..=last.min(limit) {
                    libc::close(fd as RawFd);
                }
            }
        }
    }
}

/// Reaps every child that has ended; whether `server` was among them.
///
/// # Safety
/// As [`split`].
unsafe fn reap(server: libc::pid_t) -> bool {
    let mut found = false;
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a valid pointer to an int.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        found |= pid == server;
    }
}

/// Whether this process has no child left, running or unreaped.
///
/// # Safety
/// As [`split`].
unsafe fn no_children() -> bool {
    let mut status = 0;
    // SAFETY: waitpid with a valid pointer; WNOHANG never blocks.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
    pid < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
}

/// SIGKILLs every child of this process (its own and the orphans it
/// adopted), read from `/proc/thread-self/children`.
///
/// # Safety
/// As [`split`].
unsafe fn sweep() {
    let mut buffer = [0u8; 4096];
    // SAFETY: open/read/close into a buffer of ours; kill on pids read.
    unsafe {
        let fd = libc::open(c"/proc/thread-self/children".as_ptr(), libc::O_RDONLY);
        if fd < 0 {
            return;
        }
        let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
        libc::close(fd);
        let Ok(read) = usize::try_from(read) else { return };
        let mut pid: libc::pid_t = 0;
        for &byte in &buffer[..read.min(buffer.len())] {
            if byte.is_ascii_digit() {
                pid = pid.saturating_mul(10).saturating_add(libc::pid_t::from(byte - b'0'));
            } else {
                if pid > 0 {
                    libc::kill(pid, libc::SIGKILL);
                }
                pid = 0;
            }
        }
        if pid > 0 {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Polls `done` every tick until it holds or `limit` has passed.
///
/// # Safety
/// As [`split`].
unsafe fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) {
    let ticks = limit.as_millis() / TICK_MS as u128;
    for _ in 0..=ticks {
        if done() {
            return;
        }
        // SAFETY: poll with no descriptors is a sleep.
        unsafe {
            libc::poll(std::ptr::null_mut(), 0, TICK_MS);
        }
    }
}
