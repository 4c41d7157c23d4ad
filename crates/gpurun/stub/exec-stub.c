/*
 * gpurun's exec stub: the last step of a container's start on the fast
 * path (see crates/gpurun/src/runtime/protect/exec_stub.rs for why it exists).
 *
 * The container's init execs this stub from a sealed memfd, and the stub
 * execs the container's program. So at the moment the program is exec'd,
 * /proc/self/exe names this stub, never the host's gpurun binary: a
 * program that is a "#!/proc/self/exe" script (CVE-2019-5736) starts the
 * stub again, which refuses to run on its own.
 *
 * Freestanding: no libc, no loader, no relocations; for x86_64 and
 * aarch64. Under 9 KB on x86_64, most of it page alignment.
 *
 * argv: [0] any  [1] STUB_MAGIC  [2] program  [3] search path (execvp's
 * PATH, used when program has no '/')  [4] N sinks, then N times
 * (fd, prefix, suffix)  then M, then M times "errno=text"  then the
 * program's own argv. On failure it writes prefix + text + suffix to each
 * sink (the error line gpurun would have logged) and exits 255.
 */

#define STUB_MAGIC "gpurun-exec-v1"

/* The architecture's system call numbers and its one instruction for a
 * call (x86_64's syscall, aarch64's svc #0). */
#if defined(__x86_64__)
#define SYS_write 1
#define SYS_fcntl 72
#define SYS_execve 59
#define SYS_exit_group 231
#elif defined(__aarch64__)
#define SYS_write 64
#define SYS_fcntl 25
#define SYS_execve 221
#define SYS_exit_group 94
#else
#error "gpurun's exec stub is written for x86_64 and aarch64"
#endif

#define ENOENT 2
#define ENODEV 19
#define ENOTDIR 20
#define EACCES 13
#define ETIMEDOUT 110
#define ESTALE 116

static long syscall3(long n, long a, long b, long c)
{
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
#else
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2)
			 : "memory");
	return x0;
#endif
}

static void __attribute__((noreturn)) leave(int code)
{
	for (;;)
		syscall3(SYS_exit_group, code, 0, 0);
}

static unsigned long length(const char *s)
{
	unsigned long n = 0;
	while (s[n])
		n++;
	return n;
}

static int same(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

/* A small decimal number, or -1. */
static long number(const char *s, const char **end)
{
	long n = 0;
	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9' && n < 100000)
		n = n * 10 + (*s++ - '0');
	if (end)
		*end = s;
	return n;
}

static void put(long fd, const char *s)
{
	unsigned long left = length(s);
	while (left > 0) {
		long done = syscall3(SYS_write, fd, (long)s, (long)left);
		if (done <= 0)
			return;
		s += done;
		left -= (unsigned long)done;
	}
}

static int try_exec(const char *file, char **argv, char **envp)
{
	return (int)-syscall3(SYS_execve, (long)file, (long)argv, (long)envp);
}

/* execvp's search, as gpurun's executor does it. */
static int exec_in_path(const char *program, const char *path, char **argv, char **envp)
{
	static char buf[4096];
	const char *p;
	int denied = 0;

	for (p = program; *p; p++)
		if (*p == '/')
			return try_exec(program, argv, envp);
	p = path;
	for (;;) {
		unsigned long n = 0, i;
		const char *dir = p;
		int err;
		while (p[n] && p[n] != ':')
			n++;
		if (n == 0) {
			dir = ".";
			i = 1;
		} else {
			i = n;
		}
		if (i + 1 + length(program) + 1 <= sizeof(buf)) {
			unsigned long k, j = 0;
			for (k = 0; k < i; k++)
				buf[j++] = dir[k];
			buf[j++] = '/';
			for (k = 0; program[k]; k++)
				buf[j++] = program[k];
			buf[j] = 0;
			err = try_exec(buf, argv, envp);
			if (err == EACCES)
				denied = 1;
			else if (err != ENOENT && err != ENOTDIR && err != ESTALE &&
				 err != ENODEV && err != ETIMEDOUT)
				return err;
		}
		if (!p[n])
			break;
		p += n + 1;
	}
	return denied ? EACCES : ENOENT;
}

void __attribute__((noreturn, used)) stub_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	const char *program, *path, *text = 0;
	char unknown[24];
	long sinks, descs, i, at, err;

	if (argc < 6 || !same(argv[1], STUB_MAGIC)) {
		put(2, "gpurun-exec: not to be run on its own\n");
		leave(127);
	}
	program = argv[2];
	path = argv[3];
	sinks = number(argv[4], 0);
	at = 5;
	if (sinks < 0 || at + 3 * sinks >= argc)
		goto bad;
	/* The log's descriptor must not reach the program. */
	for (i = 0; i < sinks; i++) {
		long fd = number(argv[at + 3 * i], 0);
		if (fd > 2)
			syscall3(SYS_fcntl, fd, 2 /* F_SETFD */, 1 /* FD_CLOEXEC */);
	}
	at += 3 * sinks;
	descs = number(argv[at], 0);
	if (descs < 0 || at + 1 + descs >= argc)
		goto bad;
	at += 1 + descs;

	err = exec_in_path(program, path, argv + at, envp);

	for (i = 0; i < descs; i++) {
		const char *end;
		const char *entry = argv[at - descs + i];
		if (number(entry, &end) == err && *end == '=') {
			text = end + 1;
			break;
		}
	}
	if (!text) {
		/* "errno N" for a number nobody described. */
		char digits[12];
		int n = 0, j = 0;
		long e = err;
		do {
			digits[n++] = (char)('0' + e % 10);
			e /= 10;
		} while (e && n < 11);
		for (const char *w = "errno "; *w; w++)
			unknown[j++] = *w;
		while (n)
			unknown[j++] = digits[--n];
		unknown[j] = 0;
		text = unknown;
	}
	for (i = 0; i < sinks; i++) {
		long fd = number(argv[5 + 3 * i], 0);
		put(fd, argv[5 + 3 * i + 1]);
		put(fd, text);
		put(fd, argv[5 + 3 * i + 2]);
	}
	leave(255);
bad:
	put(2, "gpurun-exec: bad arguments\n");
	leave(255);
}

/* The kernel starts us with sp at argc; stub_main gets that pointer. */
#if defined(__x86_64__)
__asm__(".globl _start\n"
	"_start:\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call stub_main\n"
	"	hlt\n");
#else
__asm__(".globl _start\n"
	"_start:\n"
	"	mov x0, sp\n"
	"	bl stub_main\n"
	"	brk #0\n");
#endif
