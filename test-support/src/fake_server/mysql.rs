//! The fake's MariaDB: the client/server protocol, as much as a login and a text query
//! need.

use super::*;

/// CLIENT_LONG_PASSWORD (MySQL's, so no MariaDB extended capabilities),
/// CONNECT_WITH_DB, PROTOCOL_41, TRANSACTIONS, SECURE_CONNECTION, PLUGIN_AUTH.
const CAPABILITIES: u32 = 0x1 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x8_0000;

pub(super) fn serve(stream: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
    let mut greeting = vec![10];
    greeting.extend_from_slice(b"10.11.0-fake\x00");
    greeting.extend_from_slice(&7u32.to_le_bytes()); // connection id
    greeting.extend_from_slice(b"abcdefgh\x00"); // nonce, part 1
    greeting.extend_from_slice(&(CAPABILITIES as u16).to_le_bytes());
    greeting.push(45); // utf8mb4_general_ci
    greeting.extend_from_slice(&2u16.to_le_bytes()); // autocommit
    greeting.extend_from_slice(&((CAPABILITIES >> 16) as u16).to_le_bytes());
    greeting.push(21);
    greeting.extend_from_slice(&[0; 10]);
    greeting.extend_from_slice(b"ijklmnopqrst\x00"); // nonce, part 2
    greeting.extend_from_slice(b"mysql_native_password\x00");
    send(stream, 0, &greeting)?;
    let (sequence, _) = receive(stream)?;
    if answer == Answer::BadPassword {
        let mut error = vec![0xff];
        error.extend_from_slice(&1045u16.to_le_bytes());
        error.extend_from_slice(b"#28000Access denied for user 'books'@'localhost'");
        return send(stream, sequence + 1, &error);
    }
    send(stream, sequence + 1, &ok())?;
    loop {
        let (_, command) = receive(stream)?;
        match command.first() {
            Some(0x01) | None => return Ok(()), // COM_QUIT
            Some(0x03) => {
                let query = String::from_utf8_lossy(&command[1..]).to_lowercase();
                if !query.starts_with("select") && !query.starts_with("set statement") {
                    send(stream, 1, &ok())?; // the session's SET
                    continue;
                }
                if answer == Answer::CloseMidProbe {
                    return stream.shutdown(Shutdown::Both);
                }
                result_set(stream, role_row(answer, Protocol::MySql))?;
            }
            Some(_) => send(stream, 1, &ok())?,
        }
    }
}

/// Two `BIGINT` columns and one row, with EOF packets (no `DEPRECATE_EOF`).
fn result_set(stream: &mut TcpStream, row: [&str; 2]) -> std::io::Result<()> {
    let mut sequence = 1;
    let mut next = |stream: &mut TcpStream, body: &[u8]| {
        let sent = send(stream, sequence, body);
        sequence = sequence.wrapping_add(1);
        sent
    };
    next(stream, &[2])?;
    for name in ["read_only", "writable"] {
        let mut column = Vec::new();
        for text in ["def", "", "", "", name, ""] {
            column.push(text.len() as u8);
            column.extend_from_slice(text.as_bytes());
        }
        column.push(0x0c);
        column.extend_from_slice(&63u16.to_le_bytes()); // binary
        column.extend_from_slice(&21u32.to_le_bytes()); // length
        column.push(0x08); // LONGLONG
        column.extend_from_slice(&0u16.to_le_bytes()); // flags
        column.push(0); // decimals
        column.extend_from_slice(&[0, 0]);
        next(stream, &column)?;
    }
    next(stream, &eof())?;
    let mut values = Vec::new();
    for value in row {
        values.push(value.len() as u8);
        values.extend_from_slice(value.as_bytes());
    }
    next(stream, &values)?;
    next(stream, &eof())
}

fn ok() -> Vec<u8> {
    vec![0x00, 0, 0, 2, 0, 0, 0]
}

fn eof() -> Vec<u8> {
    vec![0xfe, 0, 0, 2, 0]
}

fn receive(stream: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut header = [0; 4];
    stream.read_exact(&mut header)?;
    let length = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut body = vec![0; length];
    stream.read_exact(&mut body)?;
    Ok((header[3], body))
}

fn send(stream: &mut TcpStream, sequence: u8, body: &[u8]) -> std::io::Result<()> {
    let length = (body.len() as u32).to_le_bytes();
    let mut packet = vec![length[0], length[1], length[2], sequence];
    packet.extend_from_slice(body);
    stream.write_all(&packet)
}
