/* The demo add-on's program: a tiny HTTP server that answers with its version.
     /demo PORT [TOKEN [EXPIRES]]
   GET /             -> 200 "demo VERSION"
   GET /join/TOKEN   -> 200 "welcome to demo VERSION" when TOKEN is the one it was started with
                        and the time (Unix seconds) is before EXPIRES, when given; 403
                        otherwise: a new node's join hook proves it holds a live join secret.
   Built with no C library (gcc -static -nostdlib), so the image is a few kilobytes.
   x86-64 Linux system calls. VERSION comes from the compiler command line. */

#ifndef VERSION
#define VERSION "0.0.0"
#endif

#define SYS_read 0
#define SYS_rt_sigaction 13
#define SYS_write 1
#define SYS_close 3
#define SYS_socket 41
#define SYS_accept 43
#define SYS_bind 49
#define SYS_listen 50
#define SYS_setsockopt 54
#define SYS_exit 60
#define SYS_time 201

static long syscall6(long number, long a, long b, long c, long d, long e) {
    long result;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return result;
}

static unsigned long length(const char *text) {
    unsigned long n = 0;
    while (text[n]) n++;
    return n;
}

static void say(int fd, const char *text) { syscall6(SYS_write, fd, (long)text, length(text), 0, 0); }

static void fail(const char *message) {
    say(2, "demo: ");
    say(2, message);
    say(2, "\n");
    syscall6(SYS_exit, 1, 0, 0, 0, 0);
}

/* As PID 1 of its container, the kernel sends it no signal it has no handler for: TERM and
   INT get one, which ends it, so `ctr task kill` (and a kubelet's stop) stops it. */
static void stop(int signal) {
    (void)signal;
    syscall6(SYS_exit, 0, 0, 0, 0, 0);
}

static void stop_on(int signal) {
    /* The kernel's sigaction: handler, flags, restorer, mask. x86-64 delivers no signal
       without SA_RESTORER; the restorer is never reached, since stop does not return. */
    unsigned long action[4] = {(unsigned long)stop, 0x04000000 /* SA_RESTORER */, (unsigned long)stop, 0};
    syscall6(SYS_rt_sigaction, signal, (long)action, 0, 8, 0);
}

/* Appends text to buffer at *used, keeping room for the terminating zero. */
static void append(char *buffer, unsigned long size, unsigned long *used, const char *text) {
    while (*text && *used + 1 < size) buffer[(*used)++] = *text++;
    buffer[*used] = 0;
}

static void decimal(char *out, unsigned long value) {
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    while (n) *out++ = digits[--n];
    *out = 0;
}

static void respond(int fd, const char *status, const char *body) {
    char response[512], size[24];
    unsigned long used = 0;
    decimal(size, length(body));
    append(response, sizeof response, &used, "HTTP/1.0 ");
    append(response, sizeof response, &used, status);
    append(response, sizeof response, &used, "\r\nContent-Type: text/plain\r\nContent-Length: ");
    append(response, sizeof response, &used, size);
    append(response, sizeof response, &used, "\r\nConnection: close\r\n\r\n");
    append(response, sizeof response, &used, body);
    syscall6(SYS_write, fd, (long)response, used, 0, 0);
}

static int starts_with(const char *text, const char *prefix) {
    while (*prefix)
        if (*text++ != *prefix++) return 0;
    return 1;
}

/* The request line starts with `prefix`, then `token` (when given) and a space. */
static int asks_for(const char *request, const char *prefix, const char *token) {
    if (!starts_with(request, prefix)) return 0;
    request += length(prefix);
    if (token) {
        if (!*token || !starts_with(request, token)) return 0;
        request += length(token);
    }
    return *request == ' ';
}

void serve(long *stack) {
    long count = stack[0];
    char **arguments = (char **)(stack + 1);
    if (count < 2) fail("usage: /demo PORT [TOKEN [EXPIRES]]");
    const char *token = count > 2 ? arguments[2] : 0;
    unsigned long expires = 0;
    if (count > 3) {
        for (const char *p = arguments[3]; *p; p++) {
            if (*p < '0' || *p > '9') fail("EXPIRES must be Unix seconds");
            expires = expires * 10 + (unsigned long)(*p - '0');
        }
    }
    unsigned long port = 0;
    for (const char *p = arguments[1]; *p; p++) {
        if (*p < '0' || *p > '9') fail("PORT must be a number");
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port == 0 || port > 65535) fail("PORT must be between 1 and 65535");

    stop_on(15 /* SIGTERM */);
    stop_on(2 /* SIGINT */);
    int server = (int)syscall6(SYS_socket, 2 /* AF_INET */, 1 /* SOCK_STREAM */, 0, 0, 0);
    if (server < 0) fail("socket failed");
    int yes = 1;
    syscall6(SYS_setsockopt, server, 1 /* SOL_SOCKET */, 2 /* SO_REUSEADDR */, (long)&yes, sizeof yes);
    unsigned char address[16] = {2, 0, (unsigned char)(port >> 8), (unsigned char)port};
    if (syscall6(SYS_bind, server, (long)address, sizeof address, 0, 0) < 0) fail("bind failed: is the port in use?");
    if (syscall6(SYS_listen, server, 16, 0, 0, 0) < 0) fail("listen failed");
    say(1, "demo " VERSION " listening\n");

    for (;;) {
        int client = (int)syscall6(SYS_accept, server, 0, 0, 0, 0);
        if (client < 0) continue;
        char request[1024];
        long got = syscall6(SYS_read, client, (long)request, sizeof request - 1, 0, 0);
        request[got > 0 ? got : 0] = 0;
        if (asks_for(request, "GET /", 0))
            respond(client, "200 OK", "demo " VERSION "\n");
        else if (token && asks_for(request, "GET /join/", token) && expires &&
                 (unsigned long)syscall6(SYS_time, 0, 0, 0, 0, 0) >= expires)
            respond(client, "403 Forbidden", "the join token has expired\n");
        else if (token && asks_for(request, "GET /join/", token))
            respond(client, "200 OK", "welcome to demo " VERSION "\n");
        else if (starts_with(request, "GET /join/"))
            respond(client, "403 Forbidden", "wrong join token\n");
        else if (starts_with(request, "GET "))
            respond(client, "404 Not Found", "not found\n");
        else
            respond(client, "400 Bad Request", "bad request\n");
        syscall6(SYS_close, client, 0, 0, 0, 0);
    }
}

/* The kernel leaves argc and argv on the stack; hand its address to serve. */
__asm__(".global _start\n"
        "_start:\n"
        "    mov %rsp, %rdi\n"
        "    and $-16, %rsp\n"
        "    call serve\n");
