//! The fake's PostgreSQL: protocol 3.0, as much as a login and a simple query need.

use super::*;

/// `SSLRequest`'s code.
const SSL_REQUEST: u32 = 80_877_103;

pub(super) fn serve(stream: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
    // The startup packet, after an SSLRequest declined.
    loop {
        let length = read_u32(stream)? as usize;
        let mut body = vec![0; length.saturating_sub(4)];
        stream.read_exact(&mut body)?;
        if body.len() >= 4 && u32::from_be_bytes(body[..4].try_into().unwrap()) == SSL_REQUEST {
            stream.write_all(b"N")?;
            continue;
        }
        break;
    }
    if answer == Answer::BadPassword {
        let fields = [
            (b'S', "FATAL"),
            (b'V', "FATAL"),
            (b'C', "28P01"),
            (b'M', "password authentication failed for user \"books\""),
        ];
        let mut body = Vec::new();
        for (kind, text) in fields {
            body.push(kind);
            body.extend_from_slice(text.as_bytes());
            body.push(0);
        }
        body.push(0);
        return send(stream, b'E', &body);
    }
    send(stream, b'R', &0u32.to_be_bytes())?;
    send(stream, b'S', b"server_version\x0015.0\x00")?;
    send(stream, b'K', &[0, 0, 0, 1, 0, 0, 0, 2])?;
    send(stream, b'Z', b"I")?;
    loop {
        let mut kind = [0];
        stream.read_exact(&mut kind)?;
        let length = read_u32(stream)? as usize;
        let mut body = vec![0; length.saturating_sub(4)];
        stream.read_exact(&mut body)?;
        match kind[0] {
            b'X' => return Ok(()),
            b'Q' if answer == Answer::CloseMidProbe => {
                return stream.shutdown(Shutdown::Both);
            }
            b'Q' => {
                let row = role_row(answer, Protocol::Postgres);
                let mut description = 2u16.to_be_bytes().to_vec();
                for name in ["pg_is_in_recovery", "read_only"] {
                    description.extend_from_slice(name.as_bytes());
                    description.push(0);
                    description.extend_from_slice(&0u32.to_be_bytes()); // table
                    description.extend_from_slice(&0u16.to_be_bytes()); // column
                    description.extend_from_slice(&16u32.to_be_bytes()); // bool
                    description.extend_from_slice(&1i16.to_be_bytes()); // size
                    description.extend_from_slice(&(-1i32).to_be_bytes()); // modifier
                    description.extend_from_slice(&0u16.to_be_bytes()); // text
                }
                send(stream, b'T', &description)?;
                let mut data = 2u16.to_be_bytes().to_vec();
                for value in row {
                    data.extend_from_slice(&(value.len() as u32).to_be_bytes());
                    data.extend_from_slice(value.as_bytes());
                }
                send(stream, b'D', &data)?;
                send(stream, b'C', b"SELECT 1\x00")?;
                send(stream, b'Z', b"I")?;
            }
            // Anything else (a sync, a flush): ready again.
            _ => send(stream, b'Z', b"I")?,
        }
    }
}

fn read_u32(stream: &mut TcpStream) -> std::io::Result<u32> {
    let mut bytes = [0; 4];
    stream.read_exact(&mut bytes)?;
    Ok(u32::from_be_bytes(bytes))
}

fn send(stream: &mut TcpStream, kind: u8, body: &[u8]) -> std::io::Result<()> {
    let mut message = vec![kind];
    message.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    message.extend_from_slice(body);
    stream.write_all(&message)
}
