"""A raw HTTP/1.1 client for tests of our servers: Client keeps one connection alive and
reopens it when the server closed it after an error; send() answers (status, headers (names in
any case), body) whatever the status."""
import http.client


class Client:
    """One kept-alive connection, reopened when the server closed it after an error."""

    def __init__(self, address):
        self.address, self.conn = address, None

    def send(self, method, path, body=b"", headers=None):
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(*self.address, timeout=10)
            try:
                try:
                    self.conn.request(method, path, body, headers or {})
                except (BrokenPipeError, ConnectionResetError):
                    # the server answered (413 on the Content-Length) and closed while the
                    # body was still going out: its answer may be there to read
                    pass
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, r.headers, data      # names case-insensitive
            except (ConnectionError, http.client.RemoteDisconnected):
                self.conn.close()        # the server closed the kept-alive connection
                self.conn = None
                if attempt == 2:
                    raise
            except BaseException:        # e.g. BadStatusLine: fail, and start clean next time
                self.conn.close()
                self.conn = None
                raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
